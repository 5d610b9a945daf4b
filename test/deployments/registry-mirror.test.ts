import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import https from "node:https";
import type net from "node:net";
import os from "node:os";
import path from "node:path";
import { describe, test, type TestContext } from "node:test";
import { createCa, LeafMinter } from "../../src/egress/proxy/certificates.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import type { TestPlatform } from "../support/platform.ts";
import { startEgressPlatform } from "./egress-support.ts";
import { lastMessage, logsOf, pollRevision, runWait } from "./support.ts";

/**
 * A company npm mirror: HTTPS with a certificate from the company's CA (which the host's npm
 * trusts through its `cafile`), at an internal address. The host's npm config names it; the one
 * operator setting `WHARF_BUILD_REGISTRIES_INTERNAL=1` lets builds use it.
 */

const MIRROR = "npm-mirror.test";
const MIRROR_ADDRESS = "127.0.0.5";
const PACKAGE = { name: "ms", version: "2.1.3" };

interface Mirror {
  port: number;
  caFile: string;
  seen: string[];
}

/** The real `ms` tarball, from the npm cache (`npm pack`), served with its packument over TLS. */
async function startMirror(t: TestContext, dir: string): Promise<Mirror> {
  const packed = JSON.parse(
    execFileSync(
      "npm",
      ["pack", `${PACKAGE.name}@${PACKAGE.version}`, "--prefer-offline", "--pack-destination", dir, "--json"],
      { cwd: dir, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] },
    ),
  ) as Array<{ filename: string }>;
  const tarball = fs.readFileSync(path.join(dir, packed[0].filename));
  const tarballPath = `/${PACKAGE.name}/-/${PACKAGE.name}-${PACKAGE.version}.tgz`;
  const packument = {
    name: PACKAGE.name,
    "dist-tags": { latest: PACKAGE.version },
    versions: {
      [PACKAGE.version]: {
        name: PACKAGE.name,
        version: PACKAGE.version,
        main: "./index",
        dist: {
          tarball: `https://${MIRROR}${tarballPath}`,
          shasum: crypto.createHash("sha1").update(tarball).digest("hex"),
          integrity: `sha512-${crypto.createHash("sha512").update(tarball).digest("base64")}`,
        },
      },
    },
  };
  const ca = await createCa("Wharf test company CA");
  const caFile = path.join(dir, "company-ca.pem");
  fs.writeFileSync(caFile, ca.certPem);
  const seen: string[] = [];
  const leaf = await new LeafMinter(ca).contextFor({ kind: "name", host: MIRROR });
  const server = https.createServer({ SNICallback: (_name, cb) => cb(null, leaf), secureContext: leaf }, (req, res) => {
    const url = decodeURIComponent(new URL(req.url ?? "/", "http://x").pathname);
    seen.push(url);
    if (url === `/${PACKAGE.name}`)
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify(packument));
    else if (url === tarballPath)
      res.writeHead(200, { "content-type": "application/octet-stream", "content-length": tarball.length }).end(tarball);
    else res.writeHead(404, { "content-type": "application/json" }).end('{"error":"not found"}');
  });
  const port = await new Promise<number>((resolve, reject) =>
    server.once("error", reject).listen(0, MIRROR_ADDRESS, () => resolve((server.address() as net.AddressInfo).port)),
  );
  t.after(() => new Promise((r) => (server.closeAllConnections(), server.close(r))));
  return { port, caFile, seen };
}

/** A project that depends on the mirror's package and whose graph fetches what its input lists. */
function writeProject(t: TestContext): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-proj-mirror-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  fs.writeFileSync(
    path.join(dir, "package.json"),
    JSON.stringify({
      name: "mirror-project",
      version: "1.0.0",
      private: true,
      type: "module",
      dependencies: { [PACKAGE.name]: PACKAGE.version },
    }),
  );
  fs.writeFileSync(path.join(dir, "langgraph.json"), JSON.stringify({ graphs: { probe: "./graph.mjs:graph" } }));
  fs.writeFileSync(
    path.join(dir, "graph.mjs"),
    `import ms from "ms";
async function status(url) {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(10_000) });
    await res.arrayBuffer();
    return res.status;
  } catch (err) {
    return "error: " + (err.cause?.code ?? err.message);
  }
}
export const graph = {
  async invoke(input) {
    const urls = JSON.parse(String(input.messages.at(-1)?.content ?? "[]"));
    const results = [];
    for (const u of urls) results.push(await status(u));
    return { messages: [{ type: "ai", content: JSON.stringify({ twoDays: ms("2 days"), results }) }] };
  },
};
`,
  );
  return dir;
}

/**
 * The environment an operator's shell gives the platform: under `npm test`, npm exports its own
 * effective configuration as `npm_config_*` (this machine's global npmrc has
 * `cafile=/etc/ssl/certs/ca-certificates.crt`), which outranks any user config, so the host's npm
 * would report that bundle instead of the company CA and the mirror's certificate be rejected.
 */
function operatorShellEnv(env: NodeJS.ProcessEnv = process.env): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(env).filter(([k]) => !/^npm_config_/i.test(k)));
}

async function deploy(p: TestPlatform, name: string, dir: string) {
  const started = performance.now();
  const res = await p.api("/v2/deployments", {
    method: "POST",
    json: {
      name,
      source: "internal_source",
      source_config: {},
      source_revision_config: { langgraph_config_path: "langgraph.json", local_path: dir },
      secrets: [],
    },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const d = await res.json();
  const rev: Awaited<ReturnType<typeof pollRevision>> & { status_message?: string | null } = await pollRevision(
    p,
    d.id,
    d.latest_revision_id,
    120_000,
  );
  return { d, rev, ms: performance.now() - started, buildLog: await logsOf(p, d.id, rev.id, "build") };
}

describe("builds behind a company npm mirror the host's npm is configured for", () => {
  test("refused at its internal address within seconds saying which setting; deploys with WHARF_BUILD_REGISTRIES_INTERNAL=1; a revision's refusals in its runtime log once per host and reason", async (t) => {
    if (!requireCapability(t, process.platform === "linux" && isRoot(), "confined deployments need root on Linux"))
      return;
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-mirror-"));
    t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
    const mirror = await startMirror(t, dir);
    // The platform user's npm config, as an operator writes ~/.npmrc: the mirror and the company CA.
    const userconfig = path.join(dir, "npmrc");
    fs.writeFileSync(userconfig, `registry=https://${MIRROR}/\ncafile=${mirror.caFile}\n`);
    const packageManagerEnv: NodeJS.ProcessEnv = { ...operatorShellEnv(), NPM_CONFIG_USERCONFIG: userconfig };
    const saved = { ...process.env };
    t.after(() => {
      for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
      Object.assign(process.env, saved);
    });
    Object.assign(process.env, {
      // The mirror's name resolves to its internal address; nothing internal is allowed by range,
      // and the host CA store does not have the company CA (only npm's cafile does).
      WHARF_EGRESS_HOSTS: `${MIRROR}:443=${MIRROR_ADDRESS}:${mirror.port},internal.test:443=${MIRROR_ADDRESS}:${mirror.port}`,
      WHARF_EGRESS_SYSTEM_CA_FILE: "none",
      WHARF_EGRESS_SYSTEM_DNS: "0",
    });
    delete process.env.WHARF_EGRESS_ALLOW_INTERNAL;
    delete process.env.WHARF_EGRESS_UPSTREAM_CA_FILE;
    delete process.env.WHARF_BUILD_REGISTRIES_INTERNAL;
    const project = writeProject(t);

    // Without the setting: the build fails within seconds, naming the host, the reason and the setting.
    const off = (await startEgressPlatform(t, { options: { packageManagerEnv } }))!;
    const refused = await deploy(off, "mirror-refused", project);
    console.log(
      `host-configured mirror at an internal address, no setting: ${refused.rev.status} after ${Math.round(refused.ms)} ms`,
    );
    assert.equal(refused.rev.status, "BUILD_FAILED", refused.buildLog);
    assert.match(
      refused.rev.status_message ?? "",
      /egress refused GET npm-mirror\.test:443\/ms: npm-mirror\.test resolves to 127\.0\.0\.5: internal address \(loopback\); allowed by the operator's WHARF_BUILD_REGISTRIES_INTERNAL=1/,
    );
    assert.match(refused.buildLog, /egress refused GET npm-mirror\.test:443\/ms.*WHARF_BUILD_REGISTRIES_INTERNAL=1/);
    assert.equal(
      refused.buildLog.split("\n").filter((l) => l.startsWith("egress refused")).length,
      1,
      `once per host and reason, however often npm retried:\n${refused.buildLog}`,
    );
    assert.equal(mirror.seen.length, 0, "nothing reached the mirror");
    assert.ok(refused.ms < 60_000, `failed after ${refused.ms} ms`);

    // With the one setting: npm installs from the mirror (its TLS checked against npm's cafile).
    const on = (await startEgressPlatform(t, {
      options: { packageManagerEnv },
      env: { WHARF_BUILD_REGISTRIES_INTERNAL: "1" },
    }))!;
    const ok = await deploy(on, "mirror-ok", project);
    console.log(
      `host-configured mirror with WHARF_BUILD_REGISTRIES_INTERNAL=1: ${ok.rev.status} after ${Math.round(ok.ms)} ms`,
    );
    assert.equal(ok.rev.status, "DEPLOYED", `${ok.rev.status_message}\n${ok.buildLog}`);
    assert.ok(
      mirror.seen.includes(`/${PACKAGE.name}`) &&
        mirror.seen.includes(`/${PACKAGE.name}/-/${PACKAGE.name}-${PACKAGE.version}.tgz`),
      mirror.seen.join(","),
    );

    // The setting is for builds only: the agent server's request to the same internal address is
    // refused, and its runtime log says so once per (host, reason), however many requests.
    const run = await runWait(
      ok.d.source_config.custom_url,
      on.apiKey,
      JSON.stringify(["https://internal.test/a", "https://internal.test/b", "https://internal.test/a"]),
      "probe",
    );
    assert.equal(run.status, 200, JSON.stringify(run.body));
    const answer = JSON.parse(lastMessage(run.body)) as { twoDays: number; results: unknown[] };
    assert.equal(answer.twoDays, 172_800_000, "the mirror's package runs");
    assert.deepEqual(answer.results, [403, 403, 403]);
    let runtimeLog = "";
    for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 200))) {
      runtimeLog = await logsOf(on, ok.d.id, ok.rev.id, "deploy");
      if (/egress refused/.test(runtimeLog)) break;
    }
    const lines = runtimeLog.split("\n").filter((l) => /egress refused/.test(l));
    assert.equal(lines.length, 1, runtimeLog);
    assert.match(
      lines[0],
      /egress refused GET internal\.test:443\/a: internal\.test resolves to 127\.0\.0\.5: internal address \(loopback\); allowed by the operator's WHARF_EGRESS_ALLOW_INTERNAL \(for example 127\.0\.0\.5\/32\)/,
    );
  });
});
