/**
 * The unmodified `git` client through the egress proxy: clone and push over HTTPS (smart HTTP:
 * keep-alive, a large chunked POST) to a `git http-backend` that demands credentials git itself
 * never has; a header rule supplies them. Over HTTPS (CONNECT, then interception) and plain HTTP
 * (absolute-form requests to the proxy).
 */
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import type net from "node:net";
import os from "node:os";
import path from "node:path";
import { test, type TestContext } from "node:test";
import { promisify } from "node:util";
import { LeafMinter } from "../../src/egress/proxy/certificates.ts";
import { requireCapability } from "../support/requirements.ts";
import { startProxy } from "./support/proxy.ts";
import { startUpstreams } from "./support/upstreams.ts";

const run = promisify(execFile);
const TOKEN = "git-token-" + crypto.randomBytes(8).toString("hex");
const AUTH = "Basic " + Buffer.from(`x-access-token:${TOKEN}`).toString("base64");
const hasGit = (() => {
  try {
    return fs.existsSync("/usr/bin/git") || fs.existsSync("/usr/local/bin/git");
  } catch {
    return false;
  }
})();

/** A smart-HTTP git server: `git http-backend` as CGI behind Node's HTTPS server, Basic auth required. */
async function startGitServer(
  t: TestContext,
  root: string,
  ca: ConstructorParameters<typeof LeafMinter>[0],
): Promise<{
  port: number;
  plainPort: number;
  requests: Array<{ method: string; url: string; authorized: boolean; chunked: boolean }>;
}> {
  const context = await new LeafMinter(ca).contextFor({ kind: "name", host: "git.test" });
  const requests: Array<{ method: string; url: string; authorized: boolean; chunked: boolean }> = [];
  const handler = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const authorized = req.headers.authorization === AUTH;
    requests.push({
      method: req.method!,
      url: req.url!,
      authorized,
      chunked: req.headers["transfer-encoding"] === "chunked",
    });
    if (!authorized) {
      res.writeHead(401, { "www-authenticate": 'Basic realm="git"', "content-length": 0 });
      return void res.end();
    }
    const u = new URL(req.url!, "https://git.test");
    const cgi = spawn("git", ["http-backend"], {
      env: {
        PATH: process.env.PATH,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: "1",
        REMOTE_USER: "agent",
        PATH_INFO: u.pathname,
        QUERY_STRING: u.search.slice(1),
        REQUEST_METHOD: req.method,
        CONTENT_TYPE: req.headers["content-type"] ?? "",
        ...(req.headers["content-encoding"] ? { HTTP_CONTENT_ENCODING: req.headers["content-encoding"] } : {}),
      },
    });
    req.pipe(cgi.stdin);
    let head: Buffer | null = Buffer.alloc(0);
    cgi.stdout.on("data", (d: Buffer) => {
      if (head === null) return void res.write(d);
      head = Buffer.concat([head, d]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      const lines = head.subarray(0, end).toString("latin1").split("\r\n");
      let status = 200;
      const headers: Record<string, string> = {};
      for (const l of lines) {
        const i = l.indexOf(":");
        const [k, v] = [l.slice(0, i).trim(), l.slice(i + 1).trim()];
        if (k.toLowerCase() === "status") status = Number(v.split(" ")[0]);
        else headers[k] = v;
      }
      res.writeHead(status, headers);
      const rest = head.subarray(end + 4);
      head = null;
      if (rest.length) res.write(rest);
    });
    cgi.on("close", () => res.end());
    cgi.on("error", () => res.destroy());
  };
  const servers = [
    https.createServer({ SNICallback: (_name, cb) => cb(null, context) }, handler),
    http.createServer(handler),
  ];
  const [port, plainPort] = await Promise.all(
    servers.map(
      (s) => new Promise<number>((r) => s.listen(0, "127.0.0.2", () => r((s.address() as net.AddressInfo).port))),
    ),
  );
  t.after(() => Promise.all(servers.map((s) => new Promise((r) => (s.closeAllConnections(), s.close(r))))));
  return { port, plainPort, requests };
}

test("git clone and a large push through the proxy, over HTTPS and plain HTTP, credentials injected", async (t) => {
  if (!requireCapability(t, hasGit, "git is not installed (apt-get install git)")) return;
  const up = await startUpstreams(t, ["api.test"]);
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-git-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const root = path.join(dir, "srv");
  fs.mkdirSync(root);
  await run("git", ["init", "-q", "--bare", "-b", "main", path.join(root, "repo.git")]);
  await run("git", ["-C", path.join(root, "repo.git"), "config", "http.receivepack", "true"]);
  const git = await startGitServer(t, root, up.ca);

  const p = await startProxy(
    t,
    up,
    {
      rules: [
        { name: "git", match_hosts: ["git.test"], headers: [{ name: "Authorization", type: "opaque", value: AUTH }] },
      ],
    },
    {
      env: { WHARF_EGRESS_HOSTS: `git.test:443=${up.address}:${git.port},git.test:80=${up.address}:${git.plainPort}` },
    },
  );
  const env = {
    ...process.env,
    GIT_TERMINAL_PROMPT: "0",
    GIT_CONFIG_NOSYSTEM: "1",
    HOME: dir,
    GIT_AUTHOR_NAME: "a",
    GIT_AUTHOR_EMAIL: "a@x",
    GIT_COMMITTER_NAME: "a",
    GIT_COMMITTER_EMAIL: "a@x",
  };
  // HTTP/1.1: Debian 12's libcurl (7.88) stalls a streamed HTTP/2 upload now and then even straight
  // to Node's own http2 server, no proxy between (a push hung about 1 run in 8); the proxy's
  // HTTP/2 path is covered with grpc-js, curl --http2 and h2load elsewhere.
  const g = (args: string[], cwd = dir) =>
    run("git", ["-c", "http.version=HTTP/1.1", ...args], {
      cwd,
      env: { ...env, GIT_SSL_CAINFO: p.caFile },
      maxBuffer: 16 << 20,
    });

  // Explicit proxy: CONNECT git.test:443, intercepted; git has no credentials of its own.
  const work = path.join(dir, "work");
  await g(["-c", `http.proxy=${p.proxyUrl}`, "clone", "-q", "https://git.test/repo.git", work]);
  fs.writeFileSync(path.join(work, "big.bin"), crypto.randomBytes(3 << 20));
  fs.writeFileSync(path.join(work, "README"), "through the proxy\n");
  await g(["add", "."], work);
  await g(["commit", "-qm", "first"], work);
  await g(["-c", `http.proxy=${p.proxyUrl}`, "-c", "http.postBuffer=65536", "push", "-q", "origin", "HEAD:main"], work);

  // Plain HTTP: absolute-form requests to the proxy.
  const copy = path.join(dir, "copy");
  await g(["-c", `http.proxy=${p.proxyUrl}`, "clone", "-q", "http://git.test/repo.git", copy]);
  assert.equal(fs.readFileSync(path.join(copy, "README"), "utf8"), "through the proxy\n");
  assert.equal(fs.statSync(path.join(copy, "big.bin")).size, 3 << 20);

  assert.ok(git.requests.length >= 4, "both clones and the push reached the server");
  assert.ok(
    git.requests.every((r) => r.authorized),
    "every request carried the injected credential",
  );
  assert.ok(
    git.requests.some((r) => r.method === "POST" && r.url.endsWith("git-receive-pack") && r.chunked),
    "the push's pack went as a chunked upload",
  );
  assert.ok(p.audit.events.some((e) => e.kind === "inject" && e.rule === "git" && e.method === "POST"));
  assert.ok(!JSON.stringify(p.audit.events).includes(TOKEN), "the audit log never holds the credential");
});
