// The HTTP/1.1 upstream client's pure parts (request heads, audit folding) and its pool against a
// loopback server: keep-alive reuse, framing of streamed bodies, answers that end the connection,
// unsolicited bytes on an idle connection.
import assert from "node:assert/strict";
import http from "node:http";
import net from "node:net";
import { Readable } from "node:stream";
import { test } from "node:test";
import { AuditBatch } from "../../src/egress/audit/audit-batch.ts";
import type { AuditEvent } from "../../src/egress/audit/audit-log.ts";
import { HTTPParser, watchParsers } from "./support/parsers.ts";
import {
  H1Pool,
  requestHead,
  type H1Request,
  type ResponseSink,
  type UpstreamError,
} from "../../src/egress/proxy/http1/h1-upstream.ts";

const req = (over: Partial<H1Request>): H1Request => ({
  method: "GET",
  target: "/",
  headers: ["Host", "a.test"],
  body: null,
  ...over,
});
const body = () => Readable.from([Buffer.from("x")]);

test("request heads: framing and refusals", () => {
  const rows: Array<[string, H1Request, string | RegExp]> = [
    ["GET without body: no framing header", req({}), "GET / HTTP/1.1\r\nHost: a.test\r\n\r\n"],
    [
      "POST without body: explicit zero",
      req({ method: "POST" }),
      "POST / HTTP/1.1\r\nHost: a.test\r\ncontent-length: 0\r\n\r\n",
    ],
    [
      "streamed body without length: chunked",
      req({ method: "PUT", body: body() }),
      "PUT / HTTP/1.1\r\nHost: a.test\r\ntransfer-encoding: chunked\r\n\r\n",
    ],
    [
      "body with its length: kept",
      req({ method: "PUT", headers: ["Host", "a.test", "Content-Length", "1"], body: body() }),
      "PUT / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 1\r\n\r\n",
    ],
    [
      "query and repeats kept in order",
      req({ target: "/p?a=1&a=2", headers: ["Host", "a.test", "X-A", "1", "x-a", "2"] }),
      "GET /p?a=1&a=2 HTTP/1.1\r\nHost: a.test\r\nX-A: 1\r\nx-a: 2\r\n\r\n",
    ],
    ["CR LF in a value", req({ headers: ["Host", "a.test", "X", "a\r\nEvil: 1"] }), /invalid header/],
    ["space in a name", req({ headers: ["Host", "a.test", "X Y", "1"] }), /invalid header/],
    [
      "two content-lengths",
      req({ headers: ["Host", "a.test", "content-length", "1", "Content-Length", "1"], body: body() }),
      /content-length/,
    ],
    [
      "non-numeric content-length",
      req({ headers: ["Host", "a.test", "content-length", "1x"], body: body() }),
      /content-length/,
    ],
    [
      "a caller's transfer-encoding",
      req({ headers: ["Host", "a.test", "Transfer-Encoding", "chunked"], body: body() }),
      /transfer-encoding/,
    ],
    ["space in the target", req({ target: "/a b" }), /target/],
    ["bad method", req({ method: "GE T" }), /method/],
  ];
  for (const [name, r, want] of rows) {
    if (typeof want === "string") assert.equal(requestHead(r).head, want, name);
    else assert.throws(() => requestHead(r), want, name);
  }
});

test("audit batches fold identical events and keep distinct ones", () => {
  const ev = (over: Partial<AuditEvent>): AuditEvent => ({
    workspaceId: "w",
    sandboxId: "s",
    kind: "inject",
    decision: "injected",
    rule: "r",
    host: "a.test",
    port: 443,
    method: "GET",
    path: "/",
    ...over,
  });
  const b = new AuditBatch();
  assert.equal(b.add(ev({})), true, "the first event of a batch says so");
  assert.equal(b.add(ev({})), false);
  b.add(ev({ count: 3 }));
  b.add(ev({ path: "/other" }));
  b.add(ev({ sandboxId: "t" }));
  const out = b.take();
  assert.deepEqual(
    out.map((e) => [e.sandboxId, e.path, e.count]),
    [
      ["s", "/", 5],
      ["s", "/other", 1],
      ["t", "/", 1],
    ],
  );
  assert.equal(b.size, 0);
});

class Collect implements ResponseSink {
  status = 0;
  headers: string[] = [];
  body = "";
  trailers: string[] = [];
  err: UpstreamError | null = null;
  done: Promise<void>;
  private finish!: () => void;
  constructor() {
    this.done = new Promise((r) => (this.finish = r));
  }
  onHeaders(status: number, _t: string, raw: string[]) {
    this.status = status;
    this.headers = raw;
  }
  onData(c: Buffer) {
    this.body += c.toString();
    return true;
  }
  onComplete(trailers: string[]) {
    this.trailers = trailers;
    this.finish();
  }
  onError(err: UpstreamError) {
    this.err = err;
    this.finish();
  }
}

test("the pool reuses a keep-alive connection, frames bodies, and drops connections that end or misbehave", async (t) => {
  const sockets = new Set<net.Socket>();
  const server = http.createServer((q, s) => {
    let got = "";
    q.on("data", (d) => (got += d));
    q.on("end", () => {
      if (q.url === "/close") s.setHeader("connection", "close");
      if (q.url === "/trailers") {
        s.writeHead(200, { trailer: "x-t" });
        s.addTrailers({ "x-t": "v" });
        return s.end("t");
      }
      s.end(`${q.method} ${q.url} ${q.headers["transfer-encoding"] ?? q.headers["content-length"] ?? "-"} ${got}`);
    });
  });
  server.on("connection", (s) => sockets.add(s));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  const port = (server.address() as net.AddressInfo).port;
  const pool = new H1Pool({ address: "127.0.0.1", port, tls: null });
  t.after(() => pool.destroy());
  const run = async (r: Partial<H1Request>) => {
    const sink = new Collect();
    pool.request(req(r), sink);
    await sink.done;
    return sink;
  };
  assert.equal((await run({ target: "/a" })).body, "GET /a - ");
  await new Promise((r) => setImmediate(r));
  assert.equal((await run({ target: "/b" })).body, "GET /b - ");
  assert.equal(sockets.size, 1, "one connection for two sequential requests");
  assert.equal(
    (await run({ method: "POST", target: "/c", body: Readable.from(["he", "llo"]) })).body,
    "POST /c chunked hello",
  );
  assert.equal(
    (
      await run({
        method: "PUT",
        target: "/d",
        headers: ["Host", "a", "content-length", "2"],
        body: Readable.from(["ok"]),
      })
    ).body,
    "PUT /d 2 ok",
  );
  const tr = await run({ target: "/trailers" });
  assert.deepEqual([tr.body, tr.trailers], ["t", ["x-t", "v"]]);
  const head = await run({ method: "HEAD", target: "/h" });
  assert.equal([head.status, head.body].join(" "), "200 ");
  const short = await run({
    method: "PUT",
    target: "/e",
    headers: ["Host", "a", "content-length", "5"],
    body: Readable.from(["ok"]),
  });
  assert.match(String(short.err?.message), /shorter/);
  await run({ target: "/close" });
  await new Promise((r) => setTimeout(r, 50));
  assert.equal(pool.size, 0, "an answer with Connection: close ends its connection; a failed body ends its own");
  // Bytes the upstream sends while no request is outstanding close the idle connection.
  await run({ target: "/f" });
  await new Promise((r) => setTimeout(r, 20));
  const before = pool.size;
  for (const s of sockets) if (!s.destroyed) s.write("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n");
  await new Promise((r) => setTimeout(r, 50));
  assert.equal([before, pool.size].join(), "1,0");
});

test("each upstream connection's parser is deleted when the connection closes", async (t) => {
  // Response parsers: only the pool makes them here (the test's server parses requests).
  const parsers = watchParsers(t, (type) => type === HTTPParser.RESPONSE);
  const server = http.createServer((_q, s) => s.setHeader("connection", "close") && s.end("bye"));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  const pool = new H1Pool({ address: "127.0.0.1", port: (server.address() as net.AddressInfo).port, tls: null });
  t.after(() => pool.destroy());
  for (let i = 0; i < 20; i++) {
    const sink = new Collect();
    pool.request(req({ target: `/${i}` }), sink);
    await sink.done;
    assert.equal(sink.body, "bye");
  }
  for (let i = 0; i < 50 && parsers.live.size > 0; i++) await new Promise((r) => setTimeout(r, 20));
  assert.equal(parsers.closed(), 20, "one parser per connection, each deleted");
  assert.equal(parsers.live.size, 0);
});
