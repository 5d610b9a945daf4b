/** Credential callbacks against a real HTTP callback server on loopback: every failure fails closed. */
import assert from "node:assert/strict";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, test } from "node:test";
import {
  CallbackResolutionError,
  CallbackResolver,
  type CallbackSpec,
} from "../../../src/egress/credentials/cloud/callback-resolver.ts";
import type { CloudAuditEvent } from "../../../src/egress/credentials/cloud/cloud-audit.ts";

interface Seen {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}
const seen: Seen[] = [];
let server: http.Server;
let base: string;

before(async () => {
  server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (d) => (body += d));
    req.on("end", () => {
      seen.push({ path: req.url ?? "", headers: req.headers, body });
      const json = (v: unknown, status = 200) =>
        res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(v));
      const host = body ? (JSON.parse(body) as { host: string }).host : "";
      switch (req.url) {
        case "/ok":
          return json({ headers: { Authorization: `Bearer token-for-${host}`, "X-Tenant": "t1" } });
        case "/slow":
          return setTimeout(() => json({ headers: { "X-Slow": "yes" } }), 300);
        case "/hang":
          return; // never answers
        case "/500":
          return json({ error: "boom" }, 500);
        case "/redirect":
          return res.writeHead(302, { location: "/ok" }).end();
        case "/badjson":
          return res.writeHead(200, { "content-type": "application/json" }).end("{not json");
        case "/array":
          return json([{ headers: {} }]);
        case "/noheaders":
          return json({ token: "x" });
        case "/crlf":
          return json({ headers: { "X-Evil": "a\r\nInjected: 1" } });
        case "/hopbyhop":
          return json({ headers: { "Transfer-Encoding": "chunked" } });
        case "/badname":
          return json({ headers: { "Bad Name": "x" } });
        case "/number":
          return json({ headers: { "X-N": 5 } });
        case "/huge":
          return json({ headers: { "X-Big": "a".repeat(9000) } });
        case "/empty":
          return json({ headers: {} });
        default:
          return json({}, 404);
      }
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
});
after(async () => {
  server.closeAllConnections();
  await new Promise((r) => server.close(r));
});

const spec = (path: string, ttlSeconds = 60): CallbackSpec => ({
  url: `${base}${path}`,
  requestHeaders: [
    { name: "X-Callback-Key", value: "opaque-key-value" },
    { name: "X-Env", value: "prod" },
  ],
  ttlSeconds,
});

test("answers: POST with JSON {host, port}, configured headers verbatim; returned headers resolved; audit without values", async () => {
  const events: CloudAuditEvent[] = [];
  const resolver = new CallbackResolver({ audit: (e) => events.push(e) });
  seen.length = 0;
  const headers = await resolver.resolve(spec("/ok"), "api.example.com", 443);
  assert.deepEqual(headers, { Authorization: "Bearer token-for-api.example.com", "X-Tenant": "t1" });
  assert.equal(seen.length, 1);
  assert.equal(seen[0].headers["content-type"], "application/json");
  assert.equal(seen[0].headers["x-callback-key"], "opaque-key-value");
  assert.equal(seen[0].headers["x-env"], "prod");
  assert.deepEqual(JSON.parse(seen[0].body), { host: "api.example.com", port: 443 });
  const call = events.find((e) => e.kind === "callback_call");
  assert.ok(
    call && call.kind === "callback_call" && call.status === 200 && call.outcome === "ok" && call.latencyMs >= 0,
  );
  assert.deepEqual(call && call.kind === "callback_call" && call.headerNames, ["authorization", "x-tenant"]);
  const text = JSON.stringify(events);
  assert.ok(!text.includes("token-for") && !text.includes("opaque-key-value"), "no credential values in the audit");
});

test("cache: hit within ttl_seconds, per canonical host:port, refreshed after expiry", async () => {
  let now = 1_000_000;
  const events: CloudAuditEvent[] = [];
  const resolver = new CallbackResolver({ now: () => now, audit: (e) => events.push(e) });
  const s = spec("/ok", 60);
  seen.length = 0;
  await resolver.resolve(s, "a.example.com", 443);
  await resolver.resolve(s, "a.example.com", 443);
  assert.equal(seen.length, 1, "second call served from cache");
  await resolver.resolve(s, "a.example.com", 8443);
  await resolver.resolve(s, "b.example.com", 443);
  assert.equal(seen.length, 3, "other port and other host are other cache entries");
  now += 59_000;
  await resolver.resolve(s, "a.example.com", 443);
  assert.equal(seen.length, 3);
  now += 2_000;
  await resolver.resolve(s, "a.example.com", 443);
  assert.equal(seen.length, 4, "expired after ttl_seconds");
  assert.deepEqual(
    events.filter((e) => e.kind === "callback_cache").map((e) => e.kind === "callback_cache" && e.cache),
    ["miss", "hit", "miss", "miss", "hit", "miss"],
  );
  // A new spec object (a PATCHed config) starts from an empty cache.
  await resolver.resolve(spec("/ok", 60), "a.example.com", 443);
  assert.equal(seen.length, 5);
});

test("50 concurrent requests for one host make one callback request (slow callback)", async () => {
  const resolver = new CallbackResolver();
  const s = spec("/slow");
  seen.length = 0;
  const all = await Promise.all(Array.from({ length: 50 }, () => resolver.resolve(s, "busy.example.com", 443)));
  assert.equal(seen.length, 1);
  assert.ok(all.every((h) => h["X-Slow"] === "yes"));
});

const failures: Array<[string, string, RegExp]> = [
  ["/500", "status", /answered 500/],
  ["/redirect", "status", /answered 302/],
  ["/badjson", "malformed_json", /not JSON/],
  ["/array", "malformed_json", /not a JSON object/],
  ["/noheaders", "invalid_headers", /headers must be a JSON object/],
  ["/crlf", "invalid_headers", /control character/],
  ["/hopbyhop", "invalid_headers", /transfer-encoding may not be injected/],
  ["/badname", "invalid_headers", /not a valid HTTP token/],
  ["/number", "invalid_headers", /must map to a string/],
  ["/huge", "invalid_headers", /longer than 8192 bytes/],
];
for (const [path, reason, msg] of failures) {
  test(`fails closed: ${path} → ${reason}, nothing cached`, async () => {
    const events: CloudAuditEvent[] = [];
    const resolver = new CallbackResolver({ audit: (e) => events.push(e) });
    seen.length = 0;
    for (let i = 0; i < 2; i++) {
      await assert.rejects(resolver.resolve(spec(path), "x.example.com", 443), (e: unknown) => {
        assert.ok(e instanceof CallbackResolutionError);
        assert.equal(e.status, 502);
        assert.equal(e.publicMessage, "callback resolution failed");
        assert.equal(e.reason, reason);
        assert.match(e.message, msg);
        return true;
      });
    }
    assert.equal(seen.length, 2, "a failure is not cached: the next request calls again");
    assert.ok(events.some((e) => e.kind === "callback_call" && e.outcome === "error" && e.reason === reason));
  });
}

test("fails closed: timeout (callback never answers) and transport error (nothing listening)", async () => {
  const resolver = new CallbackResolver({ timeoutMs: 300 });
  const t0 = Date.now();
  await assert.rejects(
    resolver.resolve(spec("/hang"), "x.example.com", 443),
    (e: unknown) => e instanceof CallbackResolutionError && e.reason === "timeout",
  );
  assert.ok(Date.now() - t0 < 2000);
  const dead = http.createServer();
  await new Promise<void>((r) => dead.listen(0, "127.0.0.1", r));
  const port = (dead.address() as AddressInfo).port;
  await new Promise((r) => dead.close(r));
  await assert.rejects(
    resolver.resolve({ url: `http://127.0.0.1:${port}/x`, requestHeaders: [], ttlSeconds: 60 }, "x.example.com", 443),
    (e: unknown) => e instanceof CallbackResolutionError && e.reason === "transport",
  );
});

test("an empty headers object is a valid answer (nothing to inject), and cached", async () => {
  const resolver = new CallbackResolver();
  seen.length = 0;
  const s = spec("/empty");
  assert.deepEqual(await resolver.resolve(s, "e.example.com", 80), {});
  assert.deepEqual(await resolver.resolve(s, "e.example.com", 80), {});
  assert.equal(seen.length, 1);
});

test("the callback is reached with the fetch the proxy supplies (its dispatcher, its address checks)", async () => {
  const calls: string[] = [];
  const resolver = new CallbackResolver({
    fetch: async (url, init) => {
      calls.push(url);
      return fetch(url, init);
    },
  });
  await resolver.resolve(spec("/ok"), "f.example.com", 443);
  assert.deepEqual(calls, [`${base}/ok`]);
  const refusing = new CallbackResolver({
    fetch: async () => {
      throw new Error("address class private is not allowed");
    },
  });
  await assert.rejects(
    refusing.resolve(spec("/ok"), "f.example.com", 443),
    (e: unknown) => e instanceof CallbackResolutionError && e.reason === "transport",
  );
});
