/**
 * Pins exactly what the data plane's HTTP/1.1 front and upstream client rely on in Node's internal
 * llhttp binding (`_http_common`, `src/egress/proxy/http1/llhttp.ts`): exports, callback slots and
 * their argument positions, return codes, errors, head limit, strictness. A Node release that
 * changes any of it fails here (CI runs this file in the unit tier on every supported Node).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { HTTPParser, METHODS, type NativeParser } from "../../src/egress/proxy/http1/llhttp.ts";

type Call = [string, ...unknown[]];

/** A parser recording every callback; `onComplete` is what kOnHeadersComplete returns. */
function parser(type: number, maxHeaderSize = 0, onComplete = 0): { p: NativeParser; calls: Call[] } {
  const p = new HTTPParser();
  const calls: Call[] = [];
  p.initialize(type, {}, maxHeaderSize, 0);
  p[HTTPParser.kOnMessageBegin] = () => void calls.push(["begin"]);
  p[HTTPParser.kOnHeaders] = (headers: string[], url: string) => void calls.push(["headers", headers, url]);
  p[HTTPParser.kOnHeadersComplete] = (...a: unknown[]) => {
    calls.push(["complete", ...a]);
    return onComplete;
  };
  p[HTTPParser.kOnBody] = (...a: unknown[]) => void calls.push(["body", ...a]);
  p[HTTPParser.kOnMessageComplete] = () => void calls.push(["end"]);
  return { p, calls };
}

test("the binding's exports: parser class, type constants, callback slots, method table", () => {
  assert.equal(typeof HTTPParser, "function");
  for (const k of [
    "REQUEST",
    "RESPONSE",
    "kOnMessageBegin",
    "kOnHeaders",
    "kOnHeadersComplete",
    "kOnBody",
    "kOnMessageComplete",
  ] as const)
    assert.equal(typeof HTTPParser[k], "number", k);
  assert.ok(Array.isArray(METHODS));
  for (const m of ["GET", "HEAD", "POST", "PUT", "CONNECT", "OPTIONS"]) assert.ok(METHODS.includes(m), m);
});

test("a request head in one piece: headers complete with (major, minor, headers, method, url, ..., upgrade, keepAlive)", () => {
  const { p, calls } = parser(HTTPParser.REQUEST, 16384);
  const data = Buffer.from("GET /p?q=1 HTTP/1.1\r\nHost: api.test\r\nX-A: 1\r\n\r\n");
  assert.equal(p.execute(data), data.length);
  assert.deepEqual(calls[0], ["begin"]);
  const c = calls[1];
  assert.equal(c[0], "complete");
  assert.equal(c[1], 1);
  assert.equal(c[2], 1);
  assert.deepEqual(c[3], ["Host", "api.test", "X-A", "1"]);
  assert.equal(METHODS[c[4] as number], "GET");
  assert.equal(c[5], "/p?q=1");
  assert.equal(c[8], false, "upgrade");
  assert.equal(c[9], true, "keep-alive");
  assert.deepEqual(calls[2], ["end"]);
  p.close();
});

test("a head with more headers than llhttp holds (32): kOnHeaders gets them, headers complete gets undefined for headers and url", () => {
  const { p, calls } = parser(HTTPParser.REQUEST, 16384);
  const names = Array.from({ length: 40 }, (_, i) => [`X-H${i}`, String(i)]).flat();
  let head = "GET /long HTTP/1.1\r\n";
  for (let i = 0; i < names.length; i += 2) head += `${names[i]}: ${names[i + 1]}\r\n`;
  p.execute(Buffer.from(head));
  p.execute(Buffer.from("\r\n"));
  const flushed = calls.filter((c) => c[0] === "headers");
  const complete = calls.find((c) => c[0] === "complete")!;
  assert.ok(flushed.length >= 1);
  assert.equal(complete[3], undefined, "headers went through kOnHeaders");
  assert.equal(complete[5], undefined, "so did the url");
  assert.deepEqual(
    flushed.flatMap((c) => c[1] as string[]),
    names,
  );
  assert.equal(flushed.map((c) => c[2]).join(""), "/long");
  p.close();
});

test("bodies come to kOnBody as one Buffer argument; chunked trailers through kOnHeaders", () => {
  const { p, calls } = parser(HTTPParser.RESPONSE);
  const data = Buffer.from(
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n3\r\nabc\r\n0\r\nX-T: t\r\n\r\n",
  );
  assert.equal(p.execute(data), data.length);
  const complete = calls.find((c) => c[0] === "complete")!;
  assert.equal(complete[6], 200, "status");
  assert.equal(complete[7], "OK", "status text");
  const bodies = calls.filter((c) => c[0] === "body");
  assert.equal(bodies.length, 1);
  assert.equal(bodies[0].length, 2, "one argument");
  assert.ok(Buffer.isBuffer(bodies[0][1]));
  assert.equal((bodies[0][1] as Buffer).toString(), "abc");
  const trailers = calls.filter((c) => c[0] === "headers").flatMap((c) => c[1] as string[]);
  assert.deepEqual(trailers, ["X-T", "t"]);
  assert.deepEqual(calls.at(-1), ["end"]);
  p.close();
});

test("1 from headers complete skips the body (HEAD, 1xx); the next message parses", () => {
  const { p, calls } = parser(HTTPParser.RESPONSE, 0, 1);
  const data = Buffer.from("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n");
  assert.equal(p.execute(data), data.length);
  assert.equal(calls.filter((c) => c[0] === "body").length, 0);
  assert.deepEqual(
    calls.filter((c) => c[0] === "complete").map((c) => c[6]),
    [200, 204],
  );
  p.close();
});

test("CONNECT and Upgrade: upgrade is true, 2 from headers complete stops at the end of the head", () => {
  for (const head of [
    "CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n",
    "GET /ws HTTP/1.1\r\nHost: api.test\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
  ]) {
    const { p, calls } = parser(HTTPParser.REQUEST, 16384, 2);
    const r = p.execute(Buffer.from(head + "\x16\x03\x01 tunnelled bytes"));
    assert.equal(r, Buffer.byteLength(head), head);
    assert.equal(calls.find((c) => c[0] === "complete")![8], true, "upgrade");
    p.close();
  }
});

test("errors are returned, not thrown, with llhttp's codes: head over the limit, smuggling, garbage", () => {
  const big = parser(HTTPParser.REQUEST, 64);
  const overflow = big.p.execute(Buffer.from(`GET / HTTP/1.1\r\nHost: api.test\r\nX-Big: ${"a".repeat(100)}\r\n\r\n`));
  assert.ok(overflow instanceof Error);
  assert.equal((overflow as { code?: string }).code, "HPE_HEADER_OVERFLOW");
  big.p.close();
  const smuggle = parser(HTTPParser.REQUEST, 16384);
  const both = smuggle.p.execute(
    Buffer.from("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
  );
  assert.ok(both instanceof Error, "Content-Length with Transfer-Encoding is refused (strict, no lenient flags)");
  assert.match(String((both as { code?: string }).code), /^HPE_/);
  smuggle.p.close();
  const junk = parser(HTTPParser.REQUEST, 16384);
  const bad = junk.p.execute(Buffer.from("\x00\x01 not http\r\n\r\n"));
  assert.ok(bad instanceof Error);
  assert.match(String((bad as { code?: string }).code), /^HPE_/);
  junk.p.close();
});

test("finish: a body read until close ends cleanly; a cut head is an error", () => {
  const { p, calls } = parser(HTTPParser.RESPONSE);
  p.execute(Buffer.from("HTTP/1.1 200 OK\r\n\r\npartial"));
  assert.equal(p.finish(), undefined);
  assert.deepEqual(calls.at(-1), ["end"]);
  p.close();
  const cut = parser(HTTPParser.RESPONSE);
  cut.p.execute(Buffer.from("HTTP/1.1 200 OK\r\nContent-Le"));
  assert.ok(cut.p.finish() instanceof Error);
  cut.p.close();
});
