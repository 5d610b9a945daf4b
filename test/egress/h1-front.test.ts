/**
 * The data plane's own HTTP/1.1 server side, with raw sockets and real clients: keep-alive and
 * pipelining in order, Expect, HTTP/1.0 framing, half-close, HEAD, oversized heads, idle and
 * silent connections, streamed uploads with backpressure, bodies of requests answered locally.
 */
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { test, type TestContext } from "node:test";
import { HTTPParser, watchParsers } from "./support/parsers.ts";
import { startProxy, type TestProxy } from "./support/proxy.ts";
import { hostsSetting, startUpstreams, type Echo } from "./support/upstreams.ts";

const RULES = {
  rules: [
    {
      name: "api",
      match_hosts: ["api.test"],
      headers: [{ name: "Authorization", type: "plaintext", value: "Bearer injected" }],
    },
  ],
  access_control: { deny_list: ["other.test"] },
};

async function setUp(
  t: TestContext,
  env: Record<string, string> = {},
): Promise<{ p: TestProxy; port: number; seen: Echo[] }> {
  const up = await startUpstreams(t, ["api.test", "other.test"]);
  const p = await startProxy(t, up, RULES, {
    env: { WHARF_EGRESS_HOSTS: hostsSetting(up, ["api.test", "other.test"]), ...env },
  });
  return { p, port: Number(new URL(p.proxyUrl).port), seen: up.seen };
}

/** Writes `chunks` (then half-closes if `end`) and collects everything until the proxy closes or `ms` pass. */
function raw(
  port: number,
  chunks: Array<string | Buffer>,
  opts: { end?: boolean; ms?: number; gapMs?: number; until?: (text: string) => boolean } = {},
): Promise<{ text: string; closedBy: "proxy" | "timeout" | "client"; ms: number }> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const bufs: Buffer[] = [];
    const s = net.connect(port, "127.0.0.1", async () => {
      for (const c of chunks) {
        s.write(c);
        if (opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
      }
      if (opts.end) s.end();
    });
    const done = (closedBy: "proxy" | "timeout" | "client") => {
      clearTimeout(timer);
      s.destroy();
      resolve({ text: Buffer.concat(bufs).toString("latin1"), closedBy, ms: Date.now() - t0 });
    };
    const timer = setTimeout(() => done("timeout"), opts.ms ?? 3_000);
    s.on("data", (d) => {
      bufs.push(d);
      // The client hangs up once it has what it waited for (a wait for a condition, not a clock).
      if (opts.until?.(Buffer.concat(bufs).toString("latin1"))) done("client");
    });
    s.on("close", () => done("proxy"));
    s.on("error", () => {});
  });
}

/** Status codes of the answers in a raw byte stream (answers follow bodies without a line break). */
const statuses = (text: string) => [...text.matchAll(/HTTP\/1\.[01] (\d{3}) /g)].map((m) => Number(m[1]));

test("pipelined requests, bodies among them, are answered in order on one connection", async (t) => {
  const { port, seen } = await setUp(t);
  const r = await raw(
    port,
    [
      "GET http://api.test/one HTTP/1.1\r\nHost: api.test\r\n\r\n" +
        "POST http://api.test/two HTTP/1.1\r\nHost: api.test\r\nContent-Length: 5\r\n\r\nhello" +
        "POST http://api.test/three HTTP/1.1\r\nHost: api.test\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-Trailer: t\r\n\r\n",
      // The last head comes in two reads: its first pairs reach the front before the rest.
      `GET http://api.test/four HTTP/1.1\r\nHost: api.test\r\n${"X-Pad: p\r\n".repeat(40)}`,
      "Connection: close\r\n\r\n",
    ],
    { gapMs: 100 },
  );
  assert.equal(r.closedBy, "proxy");
  assert.deepEqual(statuses(r.text), [200, 200, 200, 200]);
  const order = [...r.text.matchAll(/"url":"(\/\w+)"/g)].map((m) => m[1]);
  assert.deepEqual(order, ["/one", "/two", "/three", "/four"]);
  assert.equal(seen.find((e) => e.url === "/two")!.bodyBytes, 5);
  assert.equal(seen.find((e) => e.url === "/three")!.bodyBytes, 3);
  assert.ok(seen.every((e) => e.headers.authorization === "Bearer injected"));
  assert.ok(!seen.some((e) => "x-trailer" in e.headers), "a request's trailers never become headers of the next one");
  assert.equal(
    seen.find((e) => e.url === "/four")!.rawHeaders.filter((h) => h === "X-Pad").length,
    40,
    "a head read in parts arrives whole",
  );
});

test("Expect: 100-continue is answered before the body is sent; another expectation gets 417", async (t) => {
  const { port, seen } = await setUp(t);
  const body = "x".repeat(1000);
  const res = await new Promise<{ status: number; continued: boolean; text: string }>((resolve, reject) => {
    let continued = false;
    const req = http.request({
      host: "127.0.0.1",
      port,
      method: "PUT",
      path: "http://api.test/upload",
      headers: { host: "api.test", expect: "100-continue", "content-length": body.length },
    });
    req.on("continue", () => {
      continued = true;
      req.end(body);
    });
    req.on("response", (r) => {
      let text = "";
      r.on("data", (d) => (text += d));
      r.on("end", () => resolve({ status: r.statusCode!, continued, text }));
    });
    req.on("error", reject);
  });
  assert.equal(res.status, 200);
  assert.ok(res.continued, "100 Continue came first");
  assert.equal(seen.find((e) => e.url === "/upload")!.bodyBytes, 1000);
  assert.ok(!seen.find((e) => e.url === "/upload")!.headers.expect, "Expect is the proxy's to answer, not forwarded");
  const other = await raw(port, [
    "POST http://api.test/x HTTP/1.1\r\nHost: api.test\r\nExpect: something-else\r\nContent-Length: 1\r\n\r\nx",
  ]);
  assert.deepEqual(statuses(other.text), [417]);
  assert.equal(other.closedBy, "proxy");
});

test("HTTP/1.0: a body of unknown length is delimited by the close; keep-alive is honoured when asked", async (t) => {
  const { port } = await setUp(t);
  const big = await raw(port, ["GET http://api.test/big HTTP/1.0\r\nHost: api.test\r\n\r\n"], { ms: 5_000 });
  const [head, body] = [
    big.text.slice(0, big.text.indexOf("\r\n\r\n")),
    big.text.slice(big.text.indexOf("\r\n\r\n") + 4),
  ];
  assert.match(head, /^HTTP\/1\.1 200/);
  assert.doesNotMatch(head, /transfer-encoding/i, "no chunked framing to an HTTP/1.0 client");
  assert.match(head, /connection: close/i);
  assert.equal(body.length, 1 << 20);
  assert.equal(big.closedBy, "proxy");
  const kept = await raw(port, [
    "GET http://api.test/a HTTP/1.0\r\nHost: api.test\r\nConnection: keep-alive\r\n\r\n",
    "GET http://api.test/b HTTP/1.0\r\nHost: api.test\r\n\r\n",
  ]);
  assert.deepEqual(statuses(kept.text), [200, 200]);
  assert.match(kept.text, /connection: keep-alive/i);
  assert.equal(kept.closedBy, "proxy", "the second request, without keep-alive, ends the connection");
});

test("a client that half-closes after its request still gets the whole answer; HEAD has no body; the upstream connection its slow read paused serves the next request", async (t) => {
  const { port } = await setUp(t);
  const half = await raw(port, ["GET http://api.test/big HTTP/1.1\r\nHost: api.test\r\n\r\n"], {
    end: true,
    ms: 5_000,
  });
  assert.equal(half.closedBy, "proxy");
  assert.deepEqual(statuses(half.text), [200]);
  assert.match(half.text, /transfer-encoding: chunked/i);
  assert.ok(half.text.endsWith("0\r\n\r\n"), "the chunked body ends properly");
  const head = await raw(port, [
    "HEAD http://api.test/big HTTP/1.1\r\nHost: api.test\r\n\r\nGET http://api.test/after HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n",
  ]);
  assert.deepEqual(statuses(head.text), [200, 200]);
  assert.match(head.text, /"url":"\/after"/);
});

test("an oversized head gets 431, garbage 400; both close only that connection", async (t) => {
  const { p, port } = await setUp(t);
  const huge = await raw(port, [
    `GET http://api.test/ HTTP/1.1\r\nHost: api.test\r\nX-Big: ${"a".repeat(40 * 1024)}\r\n\r\n`,
  ]);
  assert.deepEqual(statuses(huge.text), [431]);
  const junk = await raw(port, ["\x00\x01NOT HTTP AT ALL\r\n\r\n"]);
  assert.deepEqual(statuses(junk.text), [400]);
  assert.ok(
    p.audit.events.some(
      (e) => e.kind === "block" && /malformed HTTP from the sandbox \(HPE_HEADER_OVERFLOW\)/.test(e.reason ?? ""),
    ),
  );
  const ok = await raw(port, ["GET http://api.test/fine HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n"]);
  assert.deepEqual(statuses(ok.text), [200]);
});

test("idle keep-alive connections close after the idle timeout; a silent one after the header timeout, unaudited", async (t) => {
  const { p, port } = await setUp(t, { WHARF_EGRESS_IDLE_TIMEOUT_MS: "400", WHARF_EGRESS_HEADER_TIMEOUT_MS: "600" });
  const idle = await raw(port, ["GET http://api.test/x HTTP/1.1\r\nHost: api.test\r\n\r\n"], { ms: 5_000 });
  assert.deepEqual(statuses(idle.text), [200]);
  assert.equal(idle.closedBy, "proxy");
  assert.ok(idle.ms >= 350 && idle.ms < 2_500, `idle connection closed after ${idle.ms} ms`);
  const before = p.audit.events.length;
  const silent = await raw(port, [], { ms: 5_000 });
  assert.equal(silent.closedBy, "proxy");
  assert.equal(silent.text, "");
  assert.ok(silent.ms >= 550 && silent.ms < 3_000, `silent connection closed after ${silent.ms} ms`);
  assert.equal(p.audit.events.length, before, "nothing audited for a connection that never spoke");
});

test("a streamed 32 MiB upload reaches the upstream whole, with backpressure", async (t) => {
  const { p, port, seen } = await setUp(t);
  const size = 32 << 20;
  const status = await new Promise<number>((resolve, reject) => {
    const req = http.request({
      host: "127.0.0.1",
      port,
      method: "POST",
      path: "http://api.test/upload-big",
      headers: { host: "api.test" },
    });
    req.on("response", (r) => (r.resume(), r.on("end", () => resolve(r.statusCode!))));
    req.on("error", reject);
    const chunk = Buffer.alloc(256 * 1024, 1);
    let sent = 0;
    const pump = () => {
      while (sent < size) {
        sent += chunk.length;
        if (!req.write(chunk)) return void req.once("drain", pump);
      }
      req.end();
    };
    pump();
  });
  assert.equal(status, 200);
  assert.equal(seen.find((e) => e.url === "/upload-big")!.bodyBytes, size);
  assert.ok(p.audit.events.some((e) => e.kind === "inject" && e.path === "/upload-big"));
});

test("a request answered here (blocked) with a body leaves the connection usable: the body is read and dropped", async (t) => {
  const { port, seen } = await setUp(t);
  const r = await raw(port, [
    "POST http://other.test/denied HTTP/1.1\r\nHost: other.test\r\nContent-Length: 11\r\n\r\n",
    "hello world",
    "GET http://api.test/next HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n",
  ]);
  assert.deepEqual(statuses(r.text), [403, 200]);
  assert.ok(!seen.some((e) => e.url === "/denied"));
  assert.ok(seen.some((e) => e.url === "/next"));
});

test("an engine's own answer keeps its status and body; a header of it that cannot go on the wire is left out", async (t) => {
  const up = await startUpstreams(t, ["api.test"]);
  const local = {
    name: "local",
    authorize: async () => ({ action: "pass" as const }),
    answerLocally: () => ({
      action: "respond" as const,
      status: 418,
      headers: { "x-good": "yes", "x-bad": "a\r\nInjected: 1", "bad name": "x" },
      body: "teapot",
    }),
  };
  const p = await startProxy(t, up, { rules: [] }, { authorizers: [local] });
  const r = await raw(Number(new URL(p.proxyUrl).port), [
    "GET http://api.test/x HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n",
  ]);
  assert.deepEqual(statuses(r.text), [418]);
  assert.match(r.text, /x-good: yes/i);
  assert.doesNotMatch(r.text, /Injected|bad name/);
  assert.ok(r.text.endsWith("teapot"));
});

test("every request parser is deleted with its connection or when a CONNECT hands the socket over (Node keeps them otherwise)", async (t) => {
  // The front's parsers: request parsers with a head limit (Node's own servers pass none).
  const parsers = watchParsers(t, (type, maxHeaderSize) => type === HTTPParser.REQUEST && maxHeaderSize > 0);
  const { port } = await setUp(t);
  const headRead = (text: string) => text.includes("\r\n\r\n");
  const closing = Array.from({ length: 30 }, () =>
    raw(port, ["GET http://api.test/p HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n"]),
  );
  const reset = Array.from({ length: 10 }, () =>
    raw(port, ["GET http://api.test/p HTTP/1.1\r\nHost: api.test\r\n\r\n"], { ms: 10_000, until: headRead }),
  );
  const tunnels = Array.from({ length: 10 }, () =>
    raw(port, ["CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n"], { ms: 10_000, until: headRead }),
  );
  const results = await Promise.all([...closing, ...reset, ...tunnels]);
  assert.ok(results.slice(0, 40).every((r) => statuses(r.text)[0] === 200));
  assert.ok(results.slice(40).every((r) => r.text.startsWith("HTTP/1.1 200 Connection Established")));
  for (let i = 0; i < 50 && parsers.live.size > 0; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(parsers.closed(), 50, "one parser per connection, each deleted");
  assert.equal(parsers.live.size, 0, "no parser left behind");
});
