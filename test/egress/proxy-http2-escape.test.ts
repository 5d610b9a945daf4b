/**
 * The destination checks and rule contract of the HTTP/1.1 path, over HTTP/2 (what
 * proxy-loopback.test.ts checks with HTTP/1.1): `:authority` (and `Host`) must name the verified
 * destination, an absolute `:path` too; SNI must name it; paths are normalised before rules match
 * them; injected values replace the client's copies; access control wins over rules; a live update
 * reaches the next stream of an open session; a no_proxy host is tunnelled untouched. Table-driven,
 * through CONNECT and transparent capture.
 */
import assert from "node:assert/strict";
import crypto from "node:crypto";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { describe, test } from "node:test";
import { startH2Upstream } from "./fixtures/h2-upstream.ts";
import { startProxy, type TestProxy } from "./support/proxy.ts";
import { startUpstreams } from "./support/upstreams.ts";

const SECRET = "h2-esc-" + crypto.randomBytes(12).toString("hex");
const V1_SECRET = "h2-v1-" + crypto.randomBytes(12).toString("hex");
const plain = (name: string, value: string) => ({ name, type: "plaintext", value });
const CONFIG = {
  rules: [
    { name: "v1", match_hosts: ["h2.test"], match_paths: ["/v1/*"], headers: [plain("X-V1-Key", V1_SECRET)] },
    { name: "any", match_hosts: ["h2.test", "denied.test"], headers: [plain("Authorization", `Bearer ${SECRET}`)] },
  ],
  access_control: { deny_list: ["denied.test"] },
};
const NAMES = ["h2.test", "other.test", "denied.test"];

type Mode = "connect" | "capture";

/** A TCP stream to `dest:443` as the sandbox would open it: a CONNECT tunnel or a captured connection. */
async function streamTo(p: TestProxy, mode: Mode, dest: string, ports: Map<string, number>): Promise<net.Socket> {
  if (mode === "capture") {
    let port = ports.get(dest);
    if (!port) ports.set(dest, (port = await p.transparent(dest, 443)));
    return await new Promise<net.Socket>((resolve, reject) => {
      const s = net.connect(port, "127.0.0.1", () => resolve(s)).once("error", reject);
    });
  }
  const u = new URL(p.proxyUrl);
  return await new Promise<net.Socket>((resolve, reject) => {
    const req = http.request({
      host: u.hostname,
      port: Number(u.port),
      method: "CONNECT",
      path: `${dest.includes(":") ? `[${dest}]` : dest}:443`,
    });
    req.once("connect", (res, s) =>
      res.statusCode === 200 ? resolve(s) : reject(new Error(`CONNECT ${res.statusCode}`)),
    );
    req.once("error", reject);
    req.end();
  });
}

/** TLS (ALPN h2 only, trusting only the sandbox CA) then an HTTP/2 session; rejects if the proxy closes instead. */
async function h2Session(p: TestProxy, socket: net.Socket, sni: string | null): Promise<http2.ClientHttp2Session> {
  const secure = await new Promise<tls.TLSSocket>((resolve, reject) => {
    const s = tls.connect(
      {
        socket,
        servername: sni ?? undefined,
        ALPNProtocols: ["h2"],
        ca: p.sandboxCaPem,
        checkServerIdentity: () => undefined,
      },
      () => resolve(s),
    );
    s.once("error", reject);
    s.once("close", () => reject(new Error("closed during the handshake")));
  });
  assert.equal(secure.alpnProtocol, "h2");
  const session = http2.connect(`https://${sni ?? "ip"}`, { createConnection: () => secure });
  session.on("error", () => {});
  await new Promise<void>((resolve, reject) => session.once("connect", () => resolve()).once("error", reject));
  return session;
}

function request(
  s: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = s.request({ ":method": "GET", ...headers });
    let status = 0;
    let body = "";
    req.on("response", (h) => (status = Number(h[":status"])));
    req.setEncoding("utf8");
    req.on("data", (d: string) => (body += d));
    req.on("end", () => resolve({ status, body }));
    // A stream nghttp2 itself refuses as malformed is reset: status 0, the error code as body.
    req.on("error", (err: NodeJS.ErrnoException) =>
      err.code === "ERR_HTTP2_STREAM_ERROR" ? resolve({ status: 0, body: err.message }) : reject(err),
    );
    req.end();
  });
}

interface Row {
  name: string;
  dest: string;
  headers: http2.OutgoingHttpHeaders;
  status: number;
  /** What upstream must see: nothing, or the path and which rule's header (none for null). */
  upstream: null | { path: string; rule: "v1" | "any" | null };
}

const ROWS: Row[] = [
  {
    name: "the verified destination",
    dest: "h2.test",
    headers: { ":path": "/x" },
    status: 200,
    upstream: { path: "/x", rule: "any" },
  },
  {
    name: "match_paths: the path-restricted rule first",
    dest: "h2.test",
    headers: { ":path": "/v1/x?q=1" },
    status: 200,
    upstream: { path: "/v1/x?q=1", rule: "v1" },
  },
  {
    name: "dot segments resolved before matching and upstream",
    dest: "h2.test",
    headers: { ":path": "/v1/../admin" },
    status: 200,
    upstream: { path: "/admin", rule: "any" },
  },
  {
    name: "an encoded slash never matches a path-restricted rule",
    dest: "h2.test",
    headers: { ":path": "/v1/a%2Fb" },
    status: 200,
    upstream: { path: "/v1/a%2Fb", rule: "any" },
  },
  {
    name: "the client's copies of an injected header are replaced",
    dest: "h2.test",
    headers: { ":path": "/v1/dup", "x-v1-key": ["mine", "also-mine"] },
    status: 200,
    upstream: { path: "/v1/dup", rule: "v1" },
  },
  {
    name: ":authority in upper case with a trailing dot: the same host",
    dest: "h2.test",
    headers: { ":path": "/dot", ":authority": "H2.Test." },
    status: 200,
    upstream: { path: "/dot", rule: "any" },
  },
  {
    name: "a host without a rule gets nothing",
    dest: "other.test",
    headers: { ":path": "/plain" },
    status: 200,
    upstream: { path: "/plain", rule: null },
  },
  {
    name: ":authority naming another host (domain fronting)",
    dest: "other.test",
    headers: { ":path": "/", ":authority": "h2.test" },
    status: 421,
    upstream: null,
  },
  {
    name: ":authority naming another port",
    dest: "h2.test",
    headers: { ":path": "/", ":authority": "h2.test:8443" },
    status: 421,
    upstream: null,
  },
  {
    name: ":authority with userinfo",
    dest: "other.test",
    headers: { ":path": "/", ":authority": "h2.test@other.test" },
    status: 421,
    upstream: null,
  },
  {
    name: "a Host header naming another host than :authority",
    dest: "other.test",
    headers: { ":path": "/", host: "h2.test" },
    status: 421,
    upstream: null,
  },
  // RFC 9113 §8.3.1: both must name the destination when both are sent.
  {
    name: "a Host header naming the destination, :authority another host",
    dest: "h2.test",
    headers: { ":path": "/", ":authority": "other.test", host: "h2.test" },
    status: 421,
    upstream: null,
  },
  // nghttp2 itself resets a stream whose :path is not origin-form (status 0 here).
  {
    name: "an absolute :path naming another host",
    dest: "other.test",
    headers: { ":path": "https://h2.test/x" },
    status: 0,
    upstream: null,
  },
  {
    name: "a deny-listed host a rule names",
    dest: "denied.test",
    headers: { ":path": "/x" },
    status: 403,
    upstream: null,
  },
];

describe("HTTP/2 through interception: the destination checks and the rule contract", () => {
  for (const mode of ["connect", "capture"] as const) {
    test(`${mode}: every row`, async (t) => {
      const up = await startUpstreams(t, ["api.test"]);
      const h2 = await startH2Upstream(t, up, NAMES);
      const p = await startProxy(t, up, CONFIG, {
        env: { WHARF_EGRESS_HOSTS: NAMES.map((n) => `${n}:443=${up.address}:${h2.port}`).join(",") },
      });
      const ports = new Map<string, number>();
      const sessions = new Map<string, http2.ClientHttp2Session>();
      t.after(() => sessions.forEach((s) => s.destroy()));
      for (const row of ROWS) {
        let s = sessions.get(row.dest);
        if (!s) sessions.set(row.dest, (s = await h2Session(p, await streamTo(p, mode, row.dest, ports), row.dest)));
        const before = h2.seen.length;
        const r = await request(s, row.headers);
        const what = `${mode} / ${row.name}: ${r.status} ${r.body.slice(0, 200)}`;
        assert.equal(r.status, row.status, what);
        if (!row.upstream) assert.ok(!r.body.includes(SECRET) && !r.body.includes(V1_SECRET), what);
        const seen = h2.seen.slice(before);
        if (!row.upstream) {
          assert.equal(seen.length, 0, `${what}: nothing upstream`);
          continue;
        }
        assert.equal(seen.length, 1, what);
        const got = seen[0].headers;
        assert.equal(got[":authority"], row.dest, `${what}: upstream :authority is the verified destination`);
        assert.equal(got[":path"], row.upstream.path, what);
        assert.equal(got.authorization, row.upstream.rule === "any" ? `Bearer ${SECRET}` : undefined, what);
        assert.equal(got["x-v1-key"], row.upstream.rule === "v1" ? V1_SECRET : undefined, what);
      }
      assert.ok(p.audit.events.some((e) => e.kind === "block" && e.host === "denied.test"));
      assert.ok(
        p.audit.events.some(
          (e) => e.kind === "block" && /does not match the destination|names another host/.test(e.reason ?? ""),
        ),
      );
      assert.ok(!JSON.stringify(p.audit.events).includes(SECRET));
    });
  }

  test("SNI naming another host, or none for a name, closes the connection before any HTTP/2; an internal IP literal is refused over HTTP/2", async (t) => {
    const up = await startUpstreams(t, ["api.test"]);
    const h2 = await startH2Upstream(t, up, NAMES);
    const p = await startProxy(t, up, CONFIG, {
      env: { WHARF_EGRESS_HOSTS: NAMES.map((n) => `${n}:443=${up.address}:${h2.port}`).join(",") },
    });
    const ports = new Map<string, number>();
    for (const mode of ["connect", "capture"] as const) {
      await assert.rejects(
        h2Session(p, await streamTo(p, mode, "other.test", ports), "h2.test"),
        `${mode}: SNI h2.test toward other.test`,
      );
      await assert.rejects(
        h2Session(p, await streamTo(p, mode, "h2.test", ports), null),
        `${mode}: no SNI toward a name`,
      );
    }
    assert.ok(p.audit.events.some((e) => /server name "h2.test" does not match/.test(e.reason ?? "")));
    assert.ok(p.audit.events.some((e) => /server name null does not match/.test(e.reason ?? "")));
    // An IP destination needs no SNI; an internal one is still refused, per request, over HTTP/2.
    const s = await h2Session(p, await streamTo(p, "connect", "127.0.0.3", ports), null);
    t.after(() => s.destroy());
    const r = await request(s, { ":path": "/", ":authority": "127.0.0.3" });
    assert.equal(r.status, 403, r.body);
    assert.match(r.body, /internal address/);
    assert.equal(h2.seen.length, 0);
  });

  test("a live update reaches the next stream of an open HTTP/2 session", async (t) => {
    const up = await startUpstreams(t, ["api.test"]);
    const h2 = await startH2Upstream(t, up, NAMES);
    const p = await startProxy(t, up, CONFIG, {
      env: { WHARF_EGRESS_HOSTS: NAMES.map((n) => `${n}:443=${up.address}:${h2.port}`).join(",") },
    });
    const s = await h2Session(p, await streamTo(p, "connect", "h2.test", new Map()), "h2.test");
    t.after(() => s.destroy());
    assert.equal((await request(s, { ":path": "/before" })).status, 200);
    assert.equal(h2.seen.at(-1)!.headers.authorization, `Bearer ${SECRET}`);
    await p.setConfig({
      rules: [{ name: "rotated", match_hosts: ["h2.test"], headers: [plain("Authorization", "Bearer rotated")] }],
    });
    assert.equal((await request(s, { ":path": "/after" })).status, 200);
    assert.equal(h2.seen.at(-1)!.headers.authorization, "Bearer rotated", "the same session, the new rule");
    await p.setConfig({ access_control: { allow_list: ["other.test"] } });
    const before = h2.seen.length;
    const r = await request(s, { ":path": "/now-blocked" });
    assert.equal(r.status, 403, "h2.test left the allow_list: the open session's next stream is refused");
    assert.equal(h2.seen.length, before);
  });
});

test("a no_proxy host is tunnelled untouched over HTTP/2 too: the upstream's own certificate and ALPN, no credential", async (t) => {
  const up = await startUpstreams(t, ["api.test"]);
  const h2 = await startH2Upstream(t, up, NAMES);
  const config = { ...CONFIG, no_proxy: ["h2.test"] };
  const p = await startProxy(t, up, config, {
    env: { WHARF_EGRESS_HOSTS: NAMES.map((n) => `${n}:443=${up.address}:${h2.port}`).join(",") },
  });
  for (const mode of ["connect", "capture"] as const) {
    const socket = await streamTo(p, mode, "h2.test", new Map());
    // Trusting only the upstream's CA: the sandbox CA's leaf would fail here.
    const session = await h2Session({ ...p, sandboxCaPem: up.ca.certPem }, socket, "h2.test");
    const r = await request(session, { ":path": "/np" });
    session.destroy();
    assert.equal(r.status, 200, `${mode}: ${r.body}`);
    assert.equal(JSON.parse(r.body).headers.authorization, undefined, `${mode}: no credential through no_proxy`);
  }
  assert.ok(p.audit.events.some((e) => e.kind === "tunnel" && e.host === "h2.test"));
  assert.ok(!p.audit.events.some((e) => e.kind === "inject"));
});
