import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import https from "node:https";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import tls from "node:tls";
import { after, before, describe, test, type TestContext } from "node:test";
import WebSocket from "ws";
import { curl, parseCurl, run, startProxy, type TestProxy } from "./support/proxy.ts";
import { startUpstreams, type Upstreams } from "./support/upstreams.ts";

const SECRET = "sk-live-" + crypto.randomBytes(12).toString("hex");
const plain = (name: string, value: string) => ({ name, type: "plaintext", value });

const clientSockets = new Set<net.Socket>();
after(() => {
  for (const s of clientSockets) s.destroy();
});

/** Opens a CONNECT tunnel through the explicit proxy and returns the raw socket (after 200). */
function connectTunnel(p: TestProxy, authority: string): Promise<{ socket: net.Socket; status: number; head: string }> {
  return new Promise((resolve, reject) => {
    const u = new URL(p.proxyUrl);
    const s = net.connect(Number(u.port), u.hostname, () =>
      s.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`),
    );
    clientSockets.add(s);
    let buf = "";
    const onData = (d: Buffer) => {
      buf += d.toString("latin1");
      const end = buf.indexOf("\r\n\r\n");
      if (end < 0) return;
      s.off("data", onData);
      s.pause();
      const rest = buf.slice(end + 4);
      if (rest) s.unshift(Buffer.from(rest, "latin1"));
      resolve({ socket: s, status: Number(buf.split(" ")[1]), head: buf.slice(0, end) });
    };
    s.on("data", onData);
    s.on("error", reject);
  });
}

/** One HTTP/1.1 exchange over an existing (possibly TLS) stream; returns the raw response text. */
function exchange(s: net.Socket | tls.TLSSocket, request: string): Promise<string> {
  return new Promise((resolve) => {
    let out = "";
    s.on("data", (d) => (out += d.toString()));
    s.on("close", () => resolve(out));
    s.on("error", () => resolve(out));
    s.resume();
    s.write(request);
    setTimeout(() => {
      s.destroy();
      resolve(out);
    }, 1500);
  });
}

describe("egress proxy on loopback: header injection through real clients", () => {
  let up: Upstreams;
  let p: TestProxy;
  const config = {
    rules: [
      {
        name: "v1-only",
        match_hosts: ["api.test"],
        match_paths: ["/v1/*"],
        headers: [{ name: "Authorization", type: "workspace_secret", value: "Bearer {OPENAI_KEY}" }],
      },
      {
        name: "api-all",
        match_hosts: ["api.test"],
        headers: [
          plain("Authorization", "Bearer fallback"),
          { name: "X-Opaque", type: "opaque", value: "opaque-" + SECRET },
        ],
      },
      { name: "shadowed", match_hosts: ["api.test"], headers: [plain("Authorization", "Bearer never")] },
      { name: "ws", match_hosts: ["ws.test"], headers: [plain("X-WS-Token", "ws-injected")] },
    ],
  };

  const cleanups: Array<() => unknown> = [];
  const suite = { after: (fn: () => unknown) => cleanups.push(fn) } as unknown as TestContext;
  before(async () => {
    up = await startUpstreams(suite);
    p = await startProxy(suite, up, config, { secrets: { OPENAI_KEY: SECRET } });
  });
  after(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });

  test("curl: HTTPS (CONNECT + interception) and plain HTTP (absolute-form) get the injected header, replacing the client's", async () => {
    let r = parseCurl(
      await curl(p, "https://api.test/v1/models?limit=1", [
        "-H",
        "Authorization: Bearer client-own",
        "-H",
        "authorization: Bearer dup",
      ]),
    );
    assert.equal(r.status, 200);
    assert.equal(r.json.headers.authorization, `Bearer ${SECRET}`);
    assert.equal(r.json.url, "/v1/models?limit=1");
    assert.equal(r.json.headers.host, "api.test");
    assert.equal(
      r.json.rawHeaders.filter((h: string) => h.toLowerCase() === "authorization").length,
      1,
      "client copies removed",
    );
    r = parseCurl(await curl(p, "http://api.test/v1/chat"));
    assert.equal(r.json.server, "http");
    assert.equal(r.json.headers.authorization, `Bearer ${SECRET}`);
  });

  test("first matching rule wins; match_paths; dot segments are resolved before matching and upstream", async () => {
    let r = parseCurl(await curl(p, "https://api.test/v2/x"));
    assert.equal(r.json.headers.authorization, "Bearer fallback");
    assert.equal(r.json.headers["x-opaque"], "opaque-" + SECRET);
    r = parseCurl(await curl(p, "https://api.test/v1/../v2/secret", ["--path-as-is"]));
    assert.equal(r.json.url, "/v2/secret", "upstream sees the normalised path");
    assert.equal(r.json.headers.authorization, "Bearer fallback", "the /v1/* rule does not match /v1/../v2");
    r = parseCurl(await curl(p, "https://api.test/v1/%2e%2e/v2", ["--path-as-is"]));
    assert.equal(r.json.url, "/v2");
    assert.equal(r.json.headers.authorization, "Bearer fallback");
    r = parseCurl(await curl(p, "https://other.test/v1/x", ["-H", "Authorization: mine"]));
    assert.equal(r.json.headers.authorization, "mine", "no rule for other.test: untouched");
  });

  test("python3 urllib through HTTPS_PROXY, trusting the CA through SSL_CERT_FILE only", async () => {
    const script =
      "import urllib.request,json;r=urllib.request.urlopen('https://api.test/v1/py',timeout=10);print(json.loads(r.read())['headers'].get('authorization'))";
    const r = await run("python3", ["-c", script], {
      HTTPS_PROXY: p.proxyUrl,
      https_proxy: p.proxyUrl,
      SSL_CERT_FILE: p.caFile,
    });
    assert.equal(r.stderr, "");
    assert.equal(r.stdout.trim(), `Bearer ${SECRET}`);
  });

  test("Node https through a CONNECT tunnel, trusting the CA with NODE_EXTRA_CA_CERTS only", async () => {
    const script = `
      const http=require('http'),https=require('https');const u=new URL(process.env.HTTPS_PROXY);
      http.request({host:u.hostname,port:u.port,method:'CONNECT',path:'api.test:443'}).on('connect',(res,socket)=>{
        https.get({host:'api.test',path:'/v1/node',socket,agent:false},(r)=>{let b='';r.on('data',d=>b+=d);r.on('end',()=>console.log(JSON.parse(b).headers.authorization))}).on('error',e=>{console.error(e.message);process.exit(1)});
      }).end();`;
    const r = await run(process.execPath, ["-e", script], { HTTPS_PROXY: p.proxyUrl, NODE_EXTRA_CA_CERTS: p.caFile });
    assert.equal(r.stdout.trim(), `Bearer ${SECRET}`, r.stderr);
  });

  test("WebSocket upgrade over intercepted TLS carries the injected header", async () => {
    const port = await p.transparent("ws.test", 443);
    const ws = new WebSocket("wss://ws.test/socket", {
      createConnection: () =>
        tls.connect({ host: "127.0.0.1", port, servername: "ws.test", ca: p.sandboxCaPem }) as unknown as net.Socket,
    });
    const first = await new Promise<string>((resolve, reject) => {
      ws.once("message", (m) => resolve(m.toString()));
      ws.once("error", reject);
    });
    assert.equal(JSON.parse(first).headers["x-ws-token"], "ws-injected");
    const echo = await new Promise<string>((resolve) => {
      ws.once("message", (m) => resolve(m.toString()));
      ws.send("ping");
    });
    assert.equal(echo, "echo:ping");
    ws.close();
  });

  test("live update: the next request on the same keep-alive connection sees the new rules", async () => {
    const port = await p.transparent("api.test", 443);
    const agent = new https.Agent({ keepAlive: true, maxSockets: 1 });
    const get = () =>
      new Promise<{ auth: string; reused: boolean }>((resolve, reject) => {
        const req = https.get(
          {
            host: "127.0.0.1",
            port,
            servername: "api.test",
            headers: { host: "api.test" },
            path: "/live",
            ca: p.sandboxCaPem,
            agent,
          },
          (res) => {
            let b = "";
            res.on("data", (d) => (b += d));
            res.on("end", () => resolve({ auth: JSON.parse(b).headers.authorization, reused: req.reusedSocket }));
          },
        );
        req.on("error", reject);
      });
    assert.equal((await get()).auth, "Bearer fallback");
    await p.setConfig({
      rules: [
        { name: "rotated", match_hosts: ["api.test"], headers: [plain("Authorization", "Bearer rotated-token")] },
      ],
    });
    const second = await get();
    assert.equal(second.auth, "Bearer rotated-token");
    assert.ok(second.reused, "same client connection");
    await p.setConfig(config, { OPENAI_KEY: SECRET });
    agent.destroy();
  });

  test("audit: injections recorded with rule, host and path, never a value", async () => {
    const text = JSON.stringify(p.audit.events);
    assert.ok(!text.includes(SECRET) && !text.includes("fallback") && !text.includes("ws-injected"));
    assert.ok(
      p.audit.events.some(
        (e) => e.kind === "inject" && e.rule === "v1-only" && e.host === "api.test" && e.path === "/v1/models",
      ),
    );
    assert.ok(!p.audit.events.some((e) => e.path?.includes("limit=1")), "queries are not recorded");
  });
});

describe("egress proxy on loopback: verification of the real destination", () => {
  const config = {
    rules: [{ name: "api", match_hosts: ["api.test"], headers: [plain("Authorization", "Bearer " + SECRET)] }],
  };

  test("Host inside an intercepted tunnel must equal the destination (no domain fronting)", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(t, up, config);
    const before = up.seen.length;
    const { socket } = await connectTunnel(p, "other.test:443");
    const s = tls.connect({ socket, servername: "other.test", ca: p.sandboxCaPem });
    const out = await exchange(s, "GET / HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n");
    assert.match(out, /^HTTP\/1\.1 421/);
    assert.ok(!out.includes(SECRET));
    assert.equal(up.seen.length, before, "upstream never reached");
    // Absolute-form inside the tunnel naming another host: same.
    const t2 = await connectTunnel(p, "other.test:443");
    const s2 = tls.connect({ socket: t2.socket, servername: "other.test", ca: p.sandboxCaPem });
    assert.match(
      await exchange(s2, "GET https://api.test/ HTTP/1.1\r\nHost: other.test\r\nConnection: close\r\n\r\n"),
      /^HTTP\/1\.1 421/,
    );
    // Plain HTTP through the proxy with a mismatching Host.
    const t3 = await new Promise<string>((resolve) => {
      const u = new URL(p.proxyUrl);
      const c = net.connect(Number(u.port), u.hostname, () =>
        c.write("GET http://other.test/ HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n"),
      );
      let b = "";
      c.on("data", (d) => (b += d));
      c.on("close", () => resolve(b));
    });
    assert.match(t3, /^HTTP\/1\.1 421/);
    assert.ok(p.audit.events.some((e) => e.kind === "block" && /Host/.test(e.reason ?? "")));
  });

  test("SNI must equal the CONNECT target; no SNI only for IP targets", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(t, up, config);
    const { socket } = await connectTunnel(p, "other.test:443");
    const s = tls.connect({ socket, servername: "api.test", ca: p.sandboxCaPem });
    const err = await new Promise<Error>((resolve) => s.once("error", resolve));
    assert.match(err.message, /socket disconnected|ECONNRESET|closed/i);
    assert.ok(p.audit.events.some((e) => /server name "api.test" does not match/.test(e.reason ?? "")));
    const t2 = await connectTunnel(p, "api.test:443");
    const s2 = tls.connect({ socket: t2.socket, ca: p.sandboxCaPem, servername: "" });
    s2.on("error", () => {});
    await new Promise((r) => s2.once("close", r));
    assert.ok(p.audit.events.some((e) => /server name null does not match/.test(e.reason ?? "")));
  });

  test("a ClientHello split across TCP writes is reassembled; the destination check still holds", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(t, up, config);
    const { socket } = await connectTunnel(p, "api.test:443");
    // Slow the first bytes down: write the hello a few bytes at a time.
    const origWrite = socket.write.bind(socket);
    let first = true;
    (socket as any).write = (chunk: Buffer, ...rest: any[]) => {
      if (first && Buffer.isBuffer(chunk) && chunk.length > 20) {
        first = false;
        origWrite(chunk.subarray(0, 7));
        setTimeout(() => origWrite(chunk.subarray(7, 100)), 30);
        setTimeout(() => origWrite(chunk.subarray(100), ...rest), 60);
        return true;
      }
      return origWrite(chunk, ...rest);
    };
    const s = tls.connect({ socket, servername: "api.test", ca: p.sandboxCaPem });
    const out = await exchange(s, "GET /split HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n");
    assert.match(out, /^HTTP\/1\.1 200/);
    assert.ok(out.includes(`Bearer ${SECRET}`));
  });

  test("trailing dot and upper case reach the same rule (one canonical host)", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(t, up, config);
    const { socket } = await connectTunnel(p, "API.Test.:443");
    const s = tls.connect({ socket, servername: "api.test", ca: p.sandboxCaPem });
    const out = await exchange(s, "GET /dot HTTP/1.1\r\nHost: Api.Test.\r\nConnection: close\r\n\r\n");
    assert.match(out, /^HTTP\/1\.1 200/);
    assert.ok(out.includes(`Bearer ${SECRET}`), "the rule for api.test applies to API.Test.");
  });

  test("CL+TE smuggling and obs-fold are refused before anything reaches upstream", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(t, up, config);
    const before = up.seen.length;
    const { socket } = await connectTunnel(p, "api.test:80");
    const out = await exchange(
      socket,
      "POST /a HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: api.test\r\n\r\n",
    );
    assert.match(out, /^HTTP\/1\.1 400/);
    const t2 = await connectTunnel(p, "api.test:80");
    assert.match(
      await exchange(t2.socket, "GET /b HTTP/1.1\r\nHost: api.test\r\nX-A: 1\r\n  folded\r\n\r\n"),
      /^HTTP\/1\.1 400/,
    );
    const t3 = await connectTunnel(p, "api.test:80");
    assert.match(
      await exchange(
        t3.socket,
        "POST /c HTTP/1.1\r\nHost: api.test\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
      ),
      /^HTTP\/1\.1 400/,
    );
    assert.equal(up.seen.filter((e) => e.url === "/smuggled" || e.url === "/a").length, 0);
    assert.equal(up.seen.length, before);
  });

  test("a chunked body on GET stays framed upstream", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(t, up, config);
    const { socket } = await connectTunnel(p, "api.test:80");
    const out = await exchange(
      socket,
      "GET /chunked HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\nGET /after HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n",
    );
    assert.equal((out.match(/HTTP\/1\.1 200/g) ?? []).length, 2);
    const chunked = up.seen.find((e) => e.url === "/chunked")!;
    assert.equal(chunked.bodyBytes, 5);
    assert.ok(up.seen.some((e) => e.url === "/after"));
  });
});

describe("egress proxy on loopback: access control and raw TCP", () => {
  test("default posture: 80/443 only; raw TCP refused", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(t, up, {});
    const c = await connectTunnel(p, "tcp.test:5432");
    assert.equal(c.status, 403);
    assert.match(c.head, /X-Wharf-Egress: blocked/i);
    assert.equal((await connectTunnel(p, "raw.test:8443")).status, 403);
    assert.equal(parseCurl(await curl(p, "https://api.test/")).status, 200);
  });

  test("allow_list host:PORT opens raw TCP passed through untouched: the client sees the upstream's own certificate", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(t, up, {
      access_control: { allow_list: ["raw.test:8443", "tcp.test:5432", "api.test"] },
      rules: [{ name: "r", match_hosts: ["raw.test"], headers: [plain("X-Never", "x")] }],
    });
    const { socket, status } = await connectTunnel(p, "raw.test:8443");
    assert.equal(status, 200);
    const s = tls.connect({ socket, servername: "raw.test", ca: up.ca.certPem });
    await new Promise((r) => s.once("secureConnect", r));
    const peer = s.getPeerX509Certificate()!;
    assert.equal(
      peer.issuer.includes("Wharf test upstream CA"),
      true,
      "the sandbox sees the upstream's certificate, not an intercepted one",
    );
    assert.equal(s.authorized, true);
    const out = await exchange(s, "hello");
    assert.equal(out, "tls-echo:hello");
    const tcp = await connectTunnel(p, "tcp.test:5432");
    assert.equal(await exchange(tcp.socket, "ping"), "tcp-echo:ping");
    assert.ok(p.audit.events.some((e) => e.kind === "tunnel" && e.host === "raw.test" && e.port === 8443));
    // Not listed: blocked, even HTTP(S).
    assert.equal(parseCurl(await curl(p, "https://other.test/")).status, 403);
    assert.equal(parseCurl(await curl(p, "https://api.test/")).status, 200);
    // A live update that removes the entry closes the open raw tunnel.
    const open = await connectTunnel(p, "tcp.test:5432");
    const closed = new Promise((r) => open.socket.once("close", r));
    open.socket.resume();
    await p.setConfig({ access_control: { allow_list: ["api.test"] } });
    await closed;
    assert.equal((await connectTunnel(p, "tcp.test:5432")).status, 403);
  });

  test("deny_list keeps HTTP(S) open, blocks listed hosts, and cannot open raw TCP", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(t, up, { access_control: { deny_list: ["other.test", "tcp.test:5432"] } });
    assert.equal(parseCurl(await curl(p, "https://api.test/")).status, 200);
    const denied = parseCurl(await curl(p, "https://other.test/"));
    assert.equal(denied.status, 403);
    assert.match(denied.body, /deny_list entry other.test/);
    assert.equal((await connectTunnel(p, "tcp.test:5432")).status, 403);
  });

  test("no_proxy hosts bypass interception entirely (no injection, upstream certificate)", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(t, up, {
      no_proxy: ["api.test"],
      rules: [{ name: "api", match_hosts: ["api.test"], headers: [plain("Authorization", "Bearer " + SECRET)] }],
    });
    const r = await run("curl", ["-sS", "-x", p.proxyUrl, "--cacert", up.caFile, "https://api.test/np"], {
      NO_PROXY: "",
    });
    assert.equal(r.stderr, "");
    assert.ok(!r.stdout.includes(SECRET));
    assert.equal(JSON.parse(r.stdout).headers.authorization, undefined);
  });

  test("IP-literal spellings of internal addresses are refused; nothing is dialled", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(t, up, {});
    for (const target of [
      "127.1:80",
      "0x7f.0.0.1:80",
      "2130706433:80",
      "0177.0.0.1:80",
      "[::ffff:127.0.0.1]:80",
      "[::ffff:7f00:1]:80",
      "[::1]:80",
      "169.254.169.254:80",
      "[::ffff:a9fe:a9fe]:80",
      "[64:ff9b::a9fe:a9fe]:80",
      "0.0.0.0:80",
      "127.0.0.1.:80",
    ]) {
      const { socket, status } = await connectTunnel(p, target);
      assert.equal(status, 200, target);
      const host = target.slice(0, target.lastIndexOf(":"));
      const out = await exchange(socket, `GET / HTTP/1.1\r\nHost: ${host}\r\nConnection: close\r\n\r\n`);
      assert.match(out, /^HTTP\/1\.1 403/, `${target}: ${out.split("\r\n")[0]}`);
      assert.match(out, /internal address/);
    }
  });

  test("a name resolving to a private address, and a mixed answer, never dial the internal address", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(
      t,
      up,
      {},
      { env: { WHARF_EGRESS_HOSTS: `evil.test=127.0.0.3,api.test:80=${up.address}:${up.httpPort}` } },
    );
    const r = parseCurl(await curl(p, "http://evil.test/"));
    assert.equal(r.status, 403);
    assert.match(r.body, /evil.test resolves to 127.0.0.3: internal address \(loopback\)/);
  });

  test("the proxy dials the address it checked (pinned across a DNS rebinding)", async (t) => {
    const up = await startUpstreams(t);
    const { EgressProxy } = await import("../../src/egress/proxy/egress-proxy.ts");
    const { loadEgressSettings } = await import("../../src/egress/egress-settings.ts");
    const { LeafMinter, createCa } = await import("../../src/egress/proxy/certificates.ts");
    const { MemoryAudit } = await import("../../src/egress/audit/audit-log.ts");
    const { policyFrom } = await import("./support/proxy.ts");
    let calls = 0;
    const answers = [[`${up.address}`], ["127.0.0.3"]];
    const proxy = new EgressProxy({
      settings: loadEgressSettings({ WHARF_EGRESS_ALLOW_INTERNAL: `${up.address}/32`, WHARF_EGRESS_SYSTEM_DNS: "0" }),
      audit: new MemoryAudit(),
      resolve: async (_h, _port) =>
        (answers[Math.min(calls++, 1)] ?? []).map((address) => ({ address, port: up.httpPort })),
    });
    t.after(() => proxy.close());
    proxy.addSandbox({
      id: "s",
      workspaceId: "w",
      policy: await policyFrom({}),
      minter: new LeafMinter(await createCa("x")),
    });
    const l = await proxy.listenExplicit("s");
    const url = `http://127.0.0.1:${(l.address() as net.AddressInfo).port}`;
    for (let i = 0; i < 3; i++) {
      const r = parseCurl(
        await run("curl", ["-sS", "-x", url, "-w", "\n%{http_code}", "http://rebind.test/"], { NO_PROXY: "" }),
      );
      assert.equal(r.status, 200, "the checked answer is reused; the rebound answer is never dialled");
    }
    assert.equal(calls, 1);
    // A mixed answer: the internal address is skipped, the allowed one dialled.
    const mixed = new EgressProxy({
      settings: loadEgressSettings({ WHARF_EGRESS_ALLOW_INTERNAL: `${up.address}/32`, WHARF_EGRESS_SYSTEM_DNS: "0" }),
      audit: new MemoryAudit(),
      resolve: async () => [
        { address: "127.0.0.3", port: up.httpPort },
        { address: up.address, port: up.httpPort },
      ],
    });
    t.after(() => mixed.close());
    mixed.addSandbox({
      id: "s",
      workspaceId: "w",
      policy: await policyFrom({}),
      minter: new LeafMinter(await createCa("x")),
    });
    const l2 = await mixed.listenExplicit("s");
    const r2 = parseCurl(
      await run(
        "curl",
        [
          "-sS",
          "-x",
          `http://127.0.0.1:${(l2.address() as net.AddressInfo).port}`,
          "-w",
          "\n%{http_code}",
          "http://mixed.test/",
        ],
        { NO_PROXY: "" },
      ),
    );
    assert.equal(r2.status, 200);
  });

  test("the proxy never dials its own listeners (self-connection)", async (t) => {
    const up = await startUpstreams(t);
    const p = await startProxy(t, up, {}, { env: { WHARF_EGRESS_ALLOW_INTERNAL: "127.0.0.0/8" } });
    const port = Number(new URL(p.proxyUrl).port);
    const r = parseCurl(
      await run("curl", ["-sS", "-x", p.proxyUrl, "-w", "\n%{http_code}", `http://127.0.0.1:${port}/`], {
        NO_PROXY: "",
      }),
    );
    assert.equal(r.status, 403);
    void http;
    void fs;
    void path;
  });
});
