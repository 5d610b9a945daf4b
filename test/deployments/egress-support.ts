import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import type net from "node:net";
import os from "node:os";
import path from "node:path";
import type { TestContext } from "node:test";
import { createDeploymentsFeature } from "../../src/deployments/feature.ts";
import type { DeploymentsOptions } from "../../src/deployments/rollout/options.ts";
import type { Feature } from "../../src/platform/context.ts";
import { allFeatures } from "../../src/platform/features.ts";
import type { Dialect } from "../../src/store/database.ts";
import { startTestPlatform, type TestPlatform } from "../support/platform.ts";
import { FAKE_RUNNER, FAST, FIXTURES } from "./support.ts";

export const EGRESS_FIXTURES = path.join(FIXTURES, "egress");

/**
 * A platform with the egress proxy and confined deployments (the fixture agent server), plus any
 * other feature named (the sandboxes, to compare validation).
 */
export async function startEgressPlatform(
  t: TestContext,
  opts: { also?: Feature[]; options?: DeploymentsOptions; dialect?: Dialect; env?: Record<string, string> } = {},
): Promise<TestPlatform | null> {
  const names = new Set(["identity", "secrets", "egress"]);
  const features = [...allFeatures().filter((f) => names.has(f.name)), ...(opts.also ?? [])];
  features.push(createDeploymentsFeature({ ...FAST, ...FAKE_RUNNER, isolation: true, ...opts.options }));
  return startTestPlatform(t, { features, logLevel: "info", dialect: opts.dialect, env: opts.env });
}

export interface LocalRegistry {
  address: string;
  port: number;
  /** Every request path the registry answered (packuments and tarballs). */
  seen: string[];
}

/**
 * A minimal npm registry on a loopback address: the packument and the tarball (`npm pack` of a
 * fixture package) of one package, with its tarball URL under `publicUrl` (the name a build uses,
 * which the egress proxy maps to this server by operator setting).
 */
export async function startLocalRegistry(
  t: TestContext,
  opts: { packageDir: string; publicUrl: string; address: string },
): Promise<LocalRegistry> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-registry-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const packed = JSON.parse(
    execFileSync("npm", ["pack", opts.packageDir, "--pack-destination", dir, "--json"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }),
  ) as Array<{ name: string; version: string; filename: string }>;
  const { name, version, filename } = packed[0];
  const tarball = fs.readFileSync(path.join(dir, filename));
  const tarballPath = `/${name}/-/${path.basename(filename)}`;
  const packument = {
    name,
    "dist-tags": { latest: version },
    versions: {
      [version]: {
        name,
        version,
        main: "index.js",
        dist: {
          tarball: new URL(tarballPath, opts.publicUrl).href,
          shasum: crypto.createHash("sha1").update(tarball).digest("hex"),
          integrity: `sha512-${crypto.createHash("sha512").update(tarball).digest("base64")}`,
        },
      },
    },
  };
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
    seen.push(url);
    if (url === `/${name}`) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(packument));
    } else if (url === tarballPath) {
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": tarball.length });
      res.end(tarball);
    } else {
      res.writeHead(404, { "content-type": "application/json" });
      res.end('{"error":"not found"}');
    }
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.once("error", reject).listen(0, opts.address, () => resolve((server.address() as net.AddressInfo).port)),
  );
  t.after(() => new Promise((r) => (server.closeAllConnections(), server.close(r))));
  return { address: opts.address, port, seen };
}
