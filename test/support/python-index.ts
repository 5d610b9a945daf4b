import { execFileSync } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import type { TestContext } from "node:test";

const MAKE_WHEEL = path.resolve(import.meta.dirname, "../agent-server/fixtures/python-builds/make_wheel.py");

/**
 * A private PEP 503 ("simple") package index on a loopback address serving one pure-Python wheel
 * made for the test (a package that exists on no public index); `seen` lists the paths asked for.
 */
export async function startPrivateIndex(
  t: TestContext,
  opts: { dist: string; version: string; source: string; address?: string; python?: string },
): Promise<{ url: string; address: string; port: number; seen: string[] }> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-index-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const wheel = execFileSync(opts.python ?? "python3", [MAKE_WHEEL, dir, opts.dist, opts.version, opts.source], {
    encoding: "utf8",
  }).trim();
  const body = fs.readFileSync(wheel);
  const name = path.basename(wheel);
  const sha = crypto.createHash("sha256").update(body).digest("hex");
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    const p = new URL(req.url ?? "/", "http://x").pathname;
    seen.push(p);
    if (p === `/simple/${opts.dist}/`)
      res
        .writeHead(200, { "content-type": "text/html" })
        .end(`<!DOCTYPE html><html><body><a href="/files/${name}#sha256=${sha}">${name}</a></body></html>`);
    else if (p === `/files/${name}`) res.writeHead(200, { "content-type": "application/octet-stream" }).end(body);
    else res.writeHead(404).end();
  });
  const address = opts.address ?? "127.0.0.1";
  await new Promise<void>((r) => server.listen(0, address, r));
  t.after(() => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))));
  const port = (server.address() as AddressInfo).port;
  return { url: `http://${address}:${port}/simple`, address, port, seen };
}
