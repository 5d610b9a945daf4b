/**
 * Malformed HTTP/2 from a sandbox closes that connection only: bad preface, oversized header
 * lists, a rapid-reset flood (raw HEADERS + RST_STREAM pairs: the connection closed, no reset stream
 * sent upstream) and a CONTINUATION flood; another session of the same sandbox keeps working throughout.
 * Plus `curl --http2` through interception with the header rule applied.
 */
import assert from "node:assert/strict";
import http2 from "node:http2";
import tls from "node:tls";
import { test } from "node:test";
import { curl, startProxy, type TestProxy } from "./support/proxy.ts";
import { hostsSetting, startUpstreams } from "./support/upstreams.ts";

const SECRET = "h2-malformed-secret";

function tlsH2(p: TestProxy, port: number): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const s = tls.connect(
      { host: "127.0.0.1", port, servername: "api.test", ALPNProtocols: ["h2"], ca: p.sandboxCaPem },
      () => resolve(s),
    );
    s.once("error", reject);
  });
}

async function session(p: TestProxy, port: number): Promise<http2.ClientHttp2Session> {
  const socket = await tlsH2(p, port);
  const s = http2.connect("https://api.test", { createConnection: () => socket });
  s.on("error", () => {});
  await new Promise<void>((resolve, reject) => s.once("connect", () => resolve()).once("error", reject));
  return s;
}

function get(
  s: http2.ClientHttp2Session,
  path: string,
  headers: http2.OutgoingHttpHeaders = {},
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = s.request({ ":path": path, ...headers });
    let status = 0;
    let body = "";
    req.on("response", (h) => (status = Number(h[":status"])));
    req.setEncoding("utf8");
    req.on("data", (d: string) => (body += d));
    req.on("end", () => resolve({ status, body }));
    req.on("error", reject);
    req.end();
  });
}

/** Resolves when the socket closes (how long it took), or rejects after `ms`. */
function closes(socket: tls.TLSSocket, ms = 10_000): Promise<number> {
  const t0 = Date.now();
  return new Promise((resolve, reject) => {
    if (socket.destroyed) return resolve(0);
    const timer = setTimeout(() => reject(new Error("the connection stayed open")), ms);
    socket.on("data", () => {});
    socket.once("close", () => (clearTimeout(timer), resolve(Date.now() - t0)));
  });
}

/** Watches a raw connection for frames of one type from the proxy. */
function framesOf(socket: tls.TLSSocket, type: number): { seen(): boolean } {
  let buf = Buffer.alloc(0);
  let found = false;
  socket.on("data", (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    while (buf.length >= 9 && buf.length >= 9 + buf.readUIntBE(0, 3)) {
      if (buf[3] === type) found = true;
      buf = buf.subarray(9 + buf.readUIntBE(0, 3));
    }
  });
  return { seen: () => found };
}

/** One HTTP/2 frame. */
function frame(type: number, flags: number, stream: number, payload: Buffer): Buffer {
  const h = Buffer.alloc(9);
  h.writeUIntBE(payload.length, 0, 3);
  h[3] = type;
  h[4] = flags;
  h.writeUInt32BE(stream, 5);
  return Buffer.concat([h, payload]);
}
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
const SETTINGS = frame(4, 0, 0, Buffer.alloc(0));
/** HPACK: GET https / with `:authority: api.test` (literal, not indexed). */
const GET_API = Buffer.from([0x82, 0x87, 0x84, 0x01, 0x08, ...Buffer.from("api.test")]);
/** HPACK literal header without indexing, new name: `x-a: b`. */
const LITERAL = Buffer.from([0x00, 0x03, ...Buffer.from("x-a"), 0x01, ...Buffer.from("b")]);

test("HTTP/2: malformed input closes only that connection; curl --http2 gets the rule applied", async (t) => {
  const up = await startUpstreams(t, ["api.test"]);
  const config = {
    rules: [
      {
        name: "api",
        match_hosts: ["api.test"],
        headers: [{ name: "Authorization", type: "plaintext", value: `Bearer ${SECRET}` }],
      },
    ],
  };
  const p = await startProxy(t, up, config, { env: { WHARF_EGRESS_HOSTS: hostsSetting(up, ["api.test"]) } });
  const port = await p.transparent("api.test", 443);
  const healthy = await session(p, port);
  t.after(() => healthy.destroy());
  const check = async (what: string, withinMs = 10_000) => {
    const t0 = Date.now();
    const r = await get(healthy, `/after-${what.replace(/\W+/g, "-")}`);
    assert.ok(Date.now() - t0 < withinMs, `a healthy session answers at once after ${what} (${Date.now() - t0} ms)`);
    assert.equal(r.status, 200, `a healthy session still works after ${what}`);
    assert.equal(JSON.parse(r.body).headers.authorization, `Bearer ${SECRET}`);
  };
  await check("start");

  // curl speaks HTTP/2 to the proxy (ALPN h2) and gets the injected header upstream.
  const c = await curl(p, "https://api.test/curl-h2", ["--http2", "-w", "\n%{http_code}\n%{http_version}"]);
  const lines = c.stdout.split("\n");
  assert.equal(lines.at(-2), "200", c.stderr);
  assert.equal(lines.at(-1), "2", "curl negotiated HTTP/2");
  assert.equal(JSON.parse(lines.slice(0, -2).join("\n")).headers.authorization, `Bearer ${SECRET}`);
  // A body that waits for `100 Continue` gets it at once (curl would wait out its 5 s timeout).
  const posted = await curl(p, "https://api.test/curl-h2-expect", [
    "--http2",
    "-H",
    "Expect: 100-continue",
    "--expect100-timeout",
    "5",
    "--data-binary",
    "x".repeat(4096),
    "-w",
    "\n%{http_code}\n%{time_total}",
  ]);
  const postedLines = posted.stdout.split("\n");
  assert.equal(postedLines.at(-2), "200", posted.stderr);
  assert.ok(Number(postedLines.at(-1)) < 3, `answered in ${postedLines.at(-1)} s`);
  assert.equal(JSON.parse(postedLines.slice(0, -2).join("\n")).bodyBytes, 4096);

  // (1) A bad connection preface.
  const bad = await tlsH2(p, port);
  bad.write("GET / HTTP/1.1\r\nHost: api.test\r\n\r\n");
  await closes(bad);
  await check("a bad preface");

  // (2) A header list far past the limit.
  const big = await session(p, port);
  await assert.rejects(get(big, "/big", { "x-big": "a".repeat(200_000) }));
  big.destroy();
  assert.ok(!up.seen.some((e) => e.url === "/big"), "the oversized request never went upstream");
  await check("an oversized header list");

  // (3) Rapid reset, as raw frames (a client library cancels streams before they are sent):
  // HEADERS + RST_STREAM(CANCEL) pairs until the proxy answers GOAWAY.
  const flood = await tlsH2(p, port);
  flood.on("error", () => {});
  const goaway = framesOf(flood, 7);
  const floodClosed = closes(flood, 60_000).catch(() => -1);
  const upBefore = up.seen.length;
  flood.write(Buffer.concat([PREFACE, SETTINGS]));
  let pairs = 0;
  for (; pairs < 20_000 && !flood.destroyed && !goaway.seen(); pairs++) {
    const id = 2 * pairs + 1;
    if (!flood.write(Buffer.concat([frame(1, 0x5, id, GET_API), frame(3, 0, id, Buffer.from([0, 0, 0, 8]))])))
      await new Promise((r) => (flood.destroyed ? r(null) : flood.once("drain", r).once("close", r)));
    if (pairs === 50) await check("50 reset streams on another connection");
  }
  assert.ok(goaway.seen() || flood.destroyed, `the proxy cut the flood (${pairs} pairs sent)`);
  // Work stops with the GOAWAY: streams sent after it never reach upstream.
  await new Promise((r) => setTimeout(r, 300));
  const upAtGoaway = up.seen.length;
  for (let i = 0; i < 200 && !flood.destroyed; i++)
    flood.write(
      Buffer.concat([
        frame(1, 0x5, 2 * (pairs + i) + 1, GET_API),
        frame(3, 0, 2 * (pairs + i) + 1, Buffer.from([0, 0, 0, 8])),
      ]),
    );
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(up.seen.length, upAtGoaway, "nothing after the GOAWAY reaches upstream");
  // A stream reset right after its HEADERS is aborted before it goes upstream (all of them went before).
  assert.ok(
    upAtGoaway - upBefore < 100,
    `reset streams are not sent upstream: ${upAtGoaway - upBefore} requests for ${pairs} pairs`,
  );
  const gone = await Promise.race([floodClosed, new Promise<string>((r) => setTimeout(() => r("still open"), 5_000))]);
  console.log(
    `rapid reset: cut after ${pairs} pairs, ${upAtGoaway - upBefore} requests upstream, the flooding connection: ${typeof gone === "number" ? `closed after ${gone} ms` : gone}`,
  );
  assert.equal(typeof gone, "number", "the proxy closes the flooding connection (not only a GOAWAY)");
  flood.destroy();
  // No dead requests left queued in the sandbox's upstream pool ahead of the healthy one (11.9 s before).
  await check("a rapid-reset flood", 5_000);

  // (4) A CONTINUATION flood: a HEADERS frame never ended, followed by endless CONTINUATION frames.
  const cont = await tlsH2(p, port);
  cont.on("error", () => {});
  const closed = closes(cont, 15_000);
  const block = Buffer.concat(Array.from({ length: 100 }, () => LITERAL));
  cont.write(Buffer.concat([PREFACE, SETTINGS, frame(1, 0x4 * 0, 1, Buffer.from([0x82, 0x84, 0x87]))]));
  let sent = 0;
  while (!cont.destroyed && sent < 20_000) {
    const ok = cont.write(frame(9, 0, 1, block));
    sent++;
    if (!ok) await new Promise((r) => (cont.destroyed ? r(null) : cont.once("drain", r).once("close", r)));
  }
  await closed;
  assert.ok(sent < 20_000, `the proxy closed the connection after ${sent} CONTINUATION frames`);
  await check("a CONTINUATION flood");
});
