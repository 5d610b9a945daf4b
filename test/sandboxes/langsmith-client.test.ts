import assert from "node:assert/strict";
import { WS_ECHO } from "../support/sandbox-servers.ts";
import http from "node:http";
import { describe, test } from "node:test";
import WebSocket from "ws";
import { LangSmithSandbox } from "deepagents";
import { SandboxClient as ClientV09 } from "langsmith/sandbox";
import { SandboxClient, type ServiceUrl } from "langsmith-next/sandbox";
import { startSandboxPlatform } from "./support.ts";

/** A minimal WebSocket echo server (text frames), Python standard library only. */

/**
 * A GET of a URL on a tenant host (`*.localhost`, which browsers resolve to loopback and Node does
 * not): sent to the loopback address with the URL's host as the Host header.
 */
function getViaLoopback(
  url: string,
  headers: Record<string, string> = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.get(
      { host: "127.0.0.1", port: u.port, path: u.pathname + u.search, headers: { ...headers, host: u.host } },
      (res) => {
        let body = "";
        res.setEncoding("utf8");
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }));
      },
    );
    req.on("error", reject);
  });
}

/** Answers every request with its headers as JSON. */
const HEADER_ECHO = `import http.server, json
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
http.server.HTTPServer(("127.0.0.1", 8100), H).serve_forever()
`;

/** LangSmith Deployment's own client (langsmith 0.10 and deepagents' 0.9) against a running Wharf. */
describe("the langsmith sandbox client against Wharf", () => {
  test("files: write/read/stat/readRange, ls/glob/grep, download URLs; a data-plane call wakes a stopped box", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const client = new SandboxClient({ apiEndpoint: `${p.url}/v2/sandboxes`, apiKey: p.apiKey, maxRetries: 0 });
    const sb = await client.createSandbox(undefined, { name: "client-files" });
    assert.equal(sb.status, "ready");
    await sb.write("/home/user/proj/src/a.py", "import os\nprint('needle one')\n");
    await sb.write("/home/user/proj/src/b.ts", "const x = 'needle two';\n");
    await sb.write("/home/user/proj/README.md", "no match here\n");
    await sb.write("/home/user/proj/src/deep/c.py", "# needle three\n");
    assert.equal(new TextDecoder().decode(await sb.read("/home/user/proj/README.md")), "no match here\n");

    const st = await sb.stat("/home/user/proj/src/a.py");
    assert.equal(st.size_bytes, 30);
    assert.ok(st.etag);
    const head = await sb.readRange("/home/user/proj/src/a.py", { start: 0, end: 5 });
    assert.equal(new TextDecoder().decode(head.content), "import");
    assert.equal(head.partial, true);
    assert.equal(head.total_bytes, 30);
    const unchanged = await sb.readRange("/home/user/proj/src/a.py", { start: 0, ifNoneMatch: st.etag });
    assert.equal(unchanged.unchanged, true);

    const ls = await sb.ls("/home/user/proj");
    assert.deepEqual(
      ls.matches.map((m) => [m.path, m.is_dir]),
      [
        ["/home/user/proj/README.md", false],
        ["/home/user/proj/src", true],
      ],
    );
    assert.equal(ls.truncated, false);
    const py = await sb.glob("**/*.py", "/home/user/proj");
    assert.deepEqual(
      py.matches.map((m) => m.path),
      ["/home/user/proj/src/a.py", "/home/user/proj/src/deep/c.py"],
    );
    assert.ok(py.matches[0].size_bytes > 0 && py.matches[0].modified_at);
    const limited = await sb.glob("**", "/home/user/proj", { limit: 2 });
    assert.equal(limited.matches.length, 2);
    assert.equal(limited.truncated, true);

    const all = await sb.grep("needle", "/home/user/proj");
    assert.deepEqual(all.matches.map((m) => `${m.path}:${m.line}:${m.text}`).sort(), [
      "/home/user/proj/src/a.py:2:print('needle one')",
      "/home/user/proj/src/b.ts:1:const x = 'needle two';",
      "/home/user/proj/src/deep/c.py:1:# needle three",
    ]);
    const onlyPy = await sb.grep("needle", "/home/user/proj", { glob: "*.py" });
    assert.equal(onlyPy.matches.length, 2);
    const literal = await sb.grep("needle .*", "/home/user/proj");
    assert.equal(literal.matches.length, 0, "grep is literal, not a regular expression");
    await assert.rejects(sb.glob("*", "/home/user/nope"), (e: Error) => /not found/i.test(e.message));
    const hostile = await fetch(`${sb.dataplane_url}/glob`, {
      method: "POST",
      headers: { "x-api-key": p.apiKey, "content-type": "application/json" },
      body: JSON.stringify({ pattern: "*a".repeat(40), path: "/home/user" }),
    });
    assert.equal(
      hostile.status,
      422,
      "wildcards are bounded (the pattern becomes a regular expression on the platform)",
    );

    // A download link works without a key; GET, HEAD and Range; expiry.
    const link = await sb.generateDownloadURL("/home/user/proj/src/b.ts", {
      expiresInSeconds: 60,
      contentDisposition: "attachment",
    });
    assert.ok(link.token && link.expires_at);
    let res = await fetch(link.download_url);
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "const x = 'needle two';\n");
    assert.match(res.headers.get("content-disposition") ?? "", /attachment; filename="b.ts"/);
    res = await fetch(link.download_url, { method: "HEAD" });
    assert.equal(res.headers.get("content-length"), "24");
    res = await fetch(link.download_url, { headers: { range: "bytes=6-6" } });
    assert.equal(res.status, 206);
    assert.equal(await res.text(), "x");
    res = await fetch(link.download_url.slice(0, -3) + "AAA");
    assert.equal(res.status, 401);
    // Without expires_in_seconds a link lives WHARF_SANDBOX_DOWNLOAD_LINK_TTL_SECONDS (an hour), not forever.
    const defaulted = await sb.generateDownloadURL("proj/README.md");
    const ttl = Date.parse(defaulted.expires_at!) - Date.now();
    assert.ok(ttl > 3500_000 && ttl <= 3600_000, `expires in ${ttl} ms`);

    // Stopped (idle): the next data-plane request starts it; so does the link.
    await sb.stop();
    assert.equal((await client.getSandbox("client-files")).status, "stopped");
    assert.equal(new TextDecoder().decode(await sb.read("/home/user/proj/README.md")), "no match here\n");
    assert.equal((await client.getSandbox("client-files")).status, "ready");
    await sb.stop();
    res = await fetch(defaulted.download_url);
    assert.equal(await res.text(), "no match here\n");
    await sb.stop();
    const r = await sb.run("echo woke", { timeout: 30 });
    assert.equal(r.stdout, "woke\n");
    await sb.delete();
  });

  test("service URLs: HTTP and WebSocket reach a port inside the box with the token header; browser_url sets a cookie; a stopped box wakes", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const client = new SandboxClient({ apiEndpoint: `${p.url}/v2/sandboxes`, apiKey: p.apiKey, maxRetries: 0 });
    const sb = await client.createSandbox(undefined, { name: "client-svc" });
    await sb.write("/home/user/www/hello.txt", "hello from the box\n");
    await sb.write("/home/user/ws.py", WS_ECHO);
    const startServers = async () => {
      await sb.run(
        "cd www && nohup python3 -m http.server 8000 --bind 127.0.0.1 >/dev/null 2>&1 & nohup python3 ws.py >/dev/null 2>&1 & for p in 8000 8765; do for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && break; sleep 0.1; done; done",
        { timeout: 30 },
      );
    };
    await startServers();
    // Without `access` the client gets a token-bearing ServiceUrl.
    const serviceUrl = async (port: number, expiresInSeconds?: number) =>
      (await client.serviceUrl("client-svc", { port, expiresInSeconds })) as ServiceUrl;
    const svc = await serviceUrl(8000, 120);
    assert.ok("fetch" in svc);
    let res = await svc.fetch("/hello.txt");
    assert.equal(res.status, 200);
    assert.equal(await res.text(), "hello from the box\n");
    const base = await svc.serviceUrl();
    res = await fetch(`${base}/hello.txt`);
    assert.equal(res.status, 401, "no token, no service");
    res = await fetch(`${base}/hello.txt`, { headers: { "X-Langsmith-Sandbox-Service-Token": "forged.token" } });
    assert.equal(res.status, 401);
    const other = await serviceUrl(8001);
    res = await fetch(`${base}/hello.txt`, { headers: { "X-Langsmith-Sandbox-Service-Token": await other.token() } });
    assert.equal(res.status, 401, "a token is for one port");
    // browser_url: on the service's own host; the token goes into a cookie of that host, then a redirect.
    const browserUrl = await svc.browserUrl();
    assert.match(browserUrl, /^http:\/\/svc-8000-[0-9a-f-]{36}\.localhost:\d+\/\?__wharf_service_token=/);
    const landing = await getViaLoopback(browserUrl);
    assert.equal(landing.status, 302);
    assert.equal(landing.headers.location, "/");
    const setCookie = String(landing.headers["set-cookie"]);
    assert.match(setCookie, /; Path=\/; HttpOnly/);
    const cookie = setCookie.split(";")[0];
    const own = await getViaLoopback(`${new URL(browserUrl).origin}/hello.txt`, { cookie });
    assert.equal(own.body, "hello from the box\n");
    assert.equal(own.headers["content-security-policy"], undefined, "on its own origin the service's pages work");
    res = await fetch(`${base}/hello.txt`, { headers: { cookie } });
    assert.equal(await res.text(), "hello from the box\n");
    // On the console's origin: an opaque origin, no sniffing.
    assert.equal(res.headers.get("content-security-policy"), "sandbox");
    assert.equal(res.headers.get("x-content-type-options"), "nosniff");
    // Wharf's own credentials never reach the service.
    await sb.write("/home/user/echo.py", HEADER_ECHO);
    await sb.run(
      "nohup python3 echo.py >/dev/null 2>&1 & for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8100) 2>/dev/null && break; sleep 0.1; done",
      { timeout: 30 },
    );
    const echo = await serviceUrl(8100);
    res = await echo.fetch("/h", {
      headers: { "X-Api-Key": p.apiKey, cookie: "wharf_session=s; app=1", "X-App": "kept" },
    });
    const seen = (await res.json()) as Record<string, string>;
    assert.equal(seen["x-app"], "kept");
    assert.equal(seen.cookie, "app=1");
    assert.equal(seen["x-api-key"], undefined);
    assert.equal(seen["x-langsmith-sandbox-service-token"], undefined);
    assert.equal(seen.host, "localhost:8100");
    // Nothing listening: 502.
    res = await other.fetch("/");
    assert.equal(res.status, 502);
    // WebSocket through the same URL, and through the service's own host.
    const wsUrl = await serviceUrl(8765);
    const echoVia = async (url: string, host?: string) => {
      const ws = new WebSocket(url, {
        headers: { "X-Langsmith-Sandbox-Service-Token": await wsUrl.token(), ...(host ? { host } : {}) },
      });
      const echoed = await new Promise<string>((resolve, reject) => {
        ws.on("open", () => ws.send("ping through the proxy"));
        ws.on("message", (d) => resolve(d.toString()));
        ws.on("error", reject);
      });
      ws.close();
      return echoed;
    };
    assert.equal(
      await echoVia(`${(await wsUrl.serviceUrl()).replace(/^http/, "ws")}/echo`),
      "echo: ping through the proxy",
    );
    const ownHost = new URL(await wsUrl.browserUrl()).host;
    assert.equal(await echoVia(`ws://127.0.0.1:${new URL(p.url).port}/echo`, ownHost), "echo: ping through the proxy");
    // A stopped box is started by a request to its service URL (the service itself must be started again).
    await sb.stop();
    res = await svc.fetch("/hello.txt");
    assert.equal(res.status, 502);
    assert.equal((await client.getSandbox("client-svc")).status, "ready");
    await sb.delete();
  });

  test("pty: a real terminal (tty, size, input, resize, kill)", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const client = new SandboxClient({ apiEndpoint: `${p.url}/v2/sandboxes`, apiKey: p.apiKey, maxRetries: 0 });
    const sb = await client.createSandbox(undefined, { name: "client-pty" });
    const r = await sb.run("tty; stty size; test -t 0 && test -t 1 && echo interactive; echo to-stderr >&2", {
      pty: true,
      timeout: 20,
    });
    assert.equal(r.exit_code, 0);
    assert.match(r.stdout, /^\/dev\/pts\/\d+\r\n24 80\r\ninteractive\r\nto-stderr\r\n$/);
    const plain = await sb.run("tty; true", { timeout: 20 });
    assert.equal(plain.stdout, "not a tty\n");

    // Input reaches the terminal (echoed by it, as a terminal does); EOT ends `cat`.
    const h = await sb.run('read -r x; echo "got:$x"; cat; echo after-eof', { pty: true, wait: false, timeout: 20 });
    h.sendInput("hello\n");
    h.sendInput("\u0004");
    const res = await h.result;
    assert.match(res.stdout, /hello\r\ngot:hello\r\n/);
    assert.match(res.stdout, /after-eof/);

    // Resize (the same terminal's size changes under the running program) and kill, over the raw protocol.
    const ws = new WebSocket(`${sb.dataplane_url!.replace(/^http/, "ws")}/execute/ws`, {
      headers: { "X-Api-Key": p.apiKey },
    });
    const msgs: any[] = [];
    const exited = new Promise<void>((resolve, reject) => {
      ws.on("message", (d) => {
        const m = JSON.parse(d.toString());
        msgs.push(m);
        if (m.type === "stdout" && m.data.includes("30 90"))
          ws.send(JSON.stringify({ type: "resize", rows: 40, cols: 100 }));
        if (m.type === "stdout" && m.data.includes("40 100")) ws.send(JSON.stringify({ type: "kill" }));
        if (m.type === "exit") resolve();
      });
      ws.on("error", reject);
    });
    ws.on("open", () =>
      ws.send(
        JSON.stringify({
          type: "execute",
          command: "while true; do stty size; sleep 0.1; done",
          pty: true,
          rows: 30,
          cols: 90,
        }),
      ),
    );
    await exited;
    ws.close();
    const out = msgs
      .filter((m) => m.type === "stdout")
      .map((m) => m.data)
      .join("");
    assert.match(out, /^30 90\r\n/);
    assert.match(out, /40 100/);
    assert.notEqual(msgs.at(-1).exit_code, 0);
    await sb.delete();
  });

  test("deepagents' LangSmithSandbox reads and edits files in a Wharf sandbox", async (t) => {
    const p = await startSandboxPlatform(t);
    if (!p) return;
    const client = new ClientV09({ apiEndpoint: `${p.url}/v2/sandboxes`, apiKey: p.apiKey, maxRetries: 0 });
    const backend = new LangSmithSandbox({ sandbox: await client.createSandbox(undefined, { name: "deepagents" }) });
    const written = await backend.write("/home/user/notes.md", "line one\nline two\nline three\n");
    assert.ok(!written.error, written.error);
    const read = await backend.read("/home/user/notes.md");
    assert.match(String(typeof read === "string" ? read : JSON.stringify(read)), /line two/);
    const edited = await backend.edit("/home/user/notes.md", "line two", "line 2");
    assert.ok(!edited.error, edited.error);
    const files = await backend.downloadFiles(["/home/user/notes.md", "/home/user/missing.md"]);
    assert.equal(new TextDecoder().decode(files[0].content!), "line one\nline 2\nline three\n");
    assert.equal(files[1].error, "file_not_found");
    const ls = await backend.ls("/home/user");
    assert.ok(JSON.stringify(ls).includes("notes.md"), JSON.stringify(ls));
    const grep = await backend.grep("three", "/home/user");
    assert.ok(JSON.stringify(grep).includes("notes.md"), JSON.stringify(grep));
    await backend.close();
  });
});
