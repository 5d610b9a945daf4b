import assert from "node:assert/strict";
import http2 from "node:http2";
import type net from "node:net";
import tls from "node:tls";
import { test } from "node:test";
import { createCa, LeafMinter } from "../../src/egress/proxy/certificates.ts";
import { H2Origin } from "../../src/egress/proxy/h2-upstream.ts";
import type { ResponseSink, UpstreamError } from "../../src/egress/proxy/http1/h1-upstream.ts";

/** One request through the origin, answered into a sink that keeps everything. */
function fetchVia(
  origin: H2Origin,
  path: string,
  extra: string[] = [],
): Promise<{ status: number; headers: string[]; body: string; error: string | null }> {
  return new Promise((resolve) => {
    const got = { status: 0, headers: [] as string[], body: "", error: null as string | null };
    const sink: ResponseSink = {
      onHeaders: (status, _text, headers) => Object.assign(got, { status, headers }),
      onData: (chunk) => ((got.body += chunk.toString()), true),
      onComplete: () => resolve(got),
      onError: (err: UpstreamError) => resolve({ ...got, error: `${err.code}: ${err.message}` }),
    };
    origin.request(
      { method: "GET", target: path, headers: ["Host", "h2.test", "user-agent", "test", ...extra], body: null },
      sink,
    );
  });
}

/** A test CA and its leaf for `h2.test`. */
async function upstreamCertificate(): Promise<{ ca: { certPem: string }; cert: string; key: string }> {
  const ca = await createCa("h2 upstream test CA");
  const minter = new LeafMinter(ca);
  const { keyPem } = await (minter as unknown as { keysOnce(): Promise<{ keyPem: string }> }).keysOnce();
  return { ca, cert: await minter.certificatePem({ kind: "name", host: "h2.test" }), key: keyPem };
}

test("the HTTP/2 upstream client: every answer whole when its body comes in the same read as its headers (16 loops, 3,200 requests)", async (t) => {
  const { ca, cert, key } = await upstreamCertificate();
  const server = http2.createSecureServer({ cert, key });
  // HEADERS and DATA in one write: the client reads both at once.
  server.on("stream", (stream, headers) => {
    const body = JSON.stringify({ path: headers[":path"] });
    stream.respond({ ":status": 200, "content-type": "application/json", "content-length": Buffer.byteLength(body) });
    stream.end(body);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  const origin = new H2Origin({
    address: "127.0.0.1",
    port: (server.address() as net.AddressInfo).port,
    tls: { secureContext: tls.createSecureContext({ ca: ca.certPem }), servername: "h2.test" },
  });
  t.after(() => origin.destroy());
  const broken: string[] = [];
  await Promise.all(
    Array.from({ length: 16 }, async (_, c) => {
      for (let i = 0; i < 200; i++) {
        const r = await fetchVia(origin, `/load/${c}/${i}`);
        if (r.error || r.status !== 200 || r.body !== JSON.stringify({ path: `/load/${c}/${i}` }))
          broken.push(`${c}/${i}: ${r.status} ${r.error ?? JSON.stringify(r.body)}`);
      }
    }),
  );
  assert.deepEqual(broken, [], "every answer whole");
});

test("the HTTP/2 upstream client: a header name that is no token fails that request alone, not the session's other streams", async (t) => {
  const { ca, cert, key } = await upstreamCertificate();
  const server = http2.createSecureServer({ cert, key });
  server.on("stream", (stream, headers) => {
    // The first answer waits, so it is in flight on the session when the bad request comes.
    setTimeout(
      () => {
        stream.respond({ ":status": 200 });
        stream.end(String(headers[":path"]));
      },
      headers[":path"] === "/slow" ? 200 : 0,
    );
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  const origin = new H2Origin({
    address: "127.0.0.1",
    port: (server.address() as net.AddressInfo).port,
    tls: { secureContext: tls.createSecureContext({ ca: ca.certPem }), servername: "h2.test" },
  });
  t.after(() => origin.destroy());
  assert.equal((await fetchVia(origin, "/warm")).body, "/warm");
  const slow = fetchVia(origin, "/slow");
  const bad = await fetchVia(origin, "/bad", ["bad name", "x"]);
  assert.match(bad.error ?? "", /ERR_INVALID_HEADER/);
  assert.equal((await slow).body, "/slow", "the stream in flight finished");
  assert.equal((await fetchVia(origin, "/after")).body, "/after");
});

test("the HTTP/2 upstream client: an origin that only speaks HTTP/1.1 is served over HTTP/1.1; a certificate for another name fails the request", async (t) => {
  const { ca, cert, key } = await upstreamCertificate();
  const { default: https } = await import("node:https");
  const server = https.createServer({ cert, key }, (req, res) => res.end(`h1 ${req.url}`));
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  const port = (server.address() as net.AddressInfo).port;
  const secureContext = tls.createSecureContext({ ca: ca.certPem });
  const origin = new H2Origin({ address: "127.0.0.1", port, tls: { secureContext, servername: "h2.test" } });
  t.after(() => origin.destroy());
  const answers = await Promise.all([fetchVia(origin, "/a"), fetchVia(origin, "/b")]);
  assert.deepEqual(
    answers.map((a) => [a.status, a.body]),
    [
      [200, "h1 /a"],
      [200, "h1 /b"],
    ],
  );
  assert.equal((await fetchVia(origin, "/c")).body, "h1 /c");
  const wrong = new H2Origin({ address: "127.0.0.1", port, tls: { secureContext, servername: "other.test" } });
  t.after(() => wrong.destroy());
  const refused = await fetchVia(wrong, "/");
  assert.match(refused.error ?? "", /ERR_TLS_CERT_ALTNAME_INVALID/);
});
