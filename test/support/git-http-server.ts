import { spawn } from "node:child_process";
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import type { TestContext } from "node:test";

/**
 * Git's smart HTTP protocol for the repositories under `root`, on loopback: each request runs
 * `git http-backend` (git's own CGI program). Platforms clone only over network transports, so
 * tests serve their repositories like a real host would. `redirectTo` answers every request with a
 * redirect to that origin instead (redirect-following tests); `tls` serves HTTPS with that certificate.
 */
export async function startGitHttpServer(
  t: TestContext,
  root: string,
  opts: { host?: string; redirectTo?: string; tls?: { cert: string; key: string } } = {},
): Promise<{ url: string; port: number }> {
  const handler: http.RequestListener = (req, res) => {
    const url = new URL(req.url ?? "/", "http://x");
    if (opts.redirectTo) {
      res.writeHead(302, { location: `${opts.redirectTo}${url.pathname}${url.search}` }).end();
      return;
    }
    const cgi = spawn("git", ["http-backend"], {
      env: {
        PATH: process.env.PATH,
        GIT_PROJECT_ROOT: root,
        GIT_HTTP_EXPORT_ALL: "1",
        GIT_CONFIG_NOSYSTEM: "1",
        REQUEST_METHOD: req.method,
        PATH_INFO: decodeURIComponent(url.pathname),
        QUERY_STRING: url.search.slice(1),
        CONTENT_TYPE: req.headers["content-type"] ?? "",
        REMOTE_ADDR: "127.0.0.1",
        ...(req.headers["git-protocol"] ? { GIT_PROTOCOL: String(req.headers["git-protocol"]) } : {}),
      },
      stdio: ["pipe", "pipe", "ignore"],
    });
    req.pipe(cgi.stdin);
    let head = Buffer.alloc(0);
    let sent = false;
    cgi.stdout.on("data", (chunk: Buffer) => {
      if (sent) return void res.write(chunk);
      head = Buffer.concat([head, chunk]);
      const end = head.indexOf("\r\n\r\n");
      if (end < 0) return;
      let status = 200;
      const headers: Record<string, string> = {};
      for (const line of head.subarray(0, end).toString().split("\r\n")) {
        const i = line.indexOf(":");
        const name = line.slice(0, i).trim();
        const value = line.slice(i + 1).trim();
        if (name.toLowerCase() === "status") status = Number(value.split(" ")[0]);
        else headers[name] = value;
      }
      res.writeHead(status, headers);
      res.write(head.subarray(end + 4));
      sent = true;
    });
    cgi.on("close", () => (sent ? res.end() : res.writeHead(500).end()));
  };
  const server = opts.tls ? https.createServer(opts.tls, handler) : http.createServer(handler);
  const host = opts.host ?? "127.0.0.1";
  await new Promise<void>((r) => server.listen(0, host, r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  const port = (server.address() as AddressInfo).port;
  return { url: `${opts.tls ? "https" : "http"}://${host}:${port}`, port };
}
