import assert from "node:assert/strict";
import crypto from "node:crypto";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { test, type TestContext } from "node:test";
import * as grpc from "@grpc/grpc-js";
import { LeafMinter } from "../../src/egress/proxy/certificates.ts";
import { echoService } from "./fixtures/grpc-echo-service.ts";
import { startH2Upstream } from "./fixtures/h2-upstream.ts";
import { startGrpcUpstream } from "./fixtures/grpc-upstream.ts";
import { startProxy, type TestProxy } from "./support/proxy.ts";
import { hostsSetting, startUpstreams } from "./support/upstreams.ts";

const SECRET = "grpc-secret-" + crypto.randomBytes(8).toString("hex");
const listen = (server: net.Server, address: string) =>
  new Promise<number>((resolve, reject) =>
    server.once("error", reject).listen(0, address, () => resolve((server.address() as net.AddressInfo).port)),
  );

/** A CONNECT tunnel through the explicit proxy, then TLS trusting only the sandbox CA, then HTTP/2. */
async function h2Through(p: TestProxy, authority: string): Promise<http2.ClientHttp2Session> {
  const u = new URL(p.proxyUrl);
  const socket = await new Promise<net.Socket>((resolve, reject) => {
    const req = http.request({ host: u.hostname, port: Number(u.port), method: "CONNECT", path: authority });
    req.once("connect", (res, s) =>
      res.statusCode === 200 ? resolve(s) : reject(new Error(`CONNECT ${res.statusCode}`)),
    );
    req.once("error", reject);
    req.end();
  });
  const host = authority.split(":")[0];
  const session = http2.connect(`https://${authority}`, {
    createConnection: () => tls.connect({ socket, servername: host, ALPNProtocols: ["h2"], ca: p.sandboxCaPem }),
  });
  await new Promise<void>((resolve, reject) => session.once("connect", () => resolve()).once("error", reject));
  return session;
}

function h2Request(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  body?: string,
): Promise<{ headers: http2.IncomingHttpHeaders; trailers: http2.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const req = session.request(headers, { endStream: body === undefined });
    let text = "";
    let got: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders = {};
    req.on("response", (h) => (got = h));
    req.on("trailers", (h) => (trailers = h));
    req.setEncoding("utf8");
    req.on("data", (d: string) => (text += d));
    req.on("end", () => resolve({ headers: got, trailers, body: text }));
    req.on("error", reject);
    if (body !== undefined) {
      // Two DATA frames: the body is streamed, not a single buffer.
      req.write(body.slice(0, 3));
      setTimeout(() => req.end(body.slice(3)), 20);
    }
  });
}

test("HTTP/2 through interception: the header rule injects, bodies stream both ways, trailers come back; HTTP/1.1-only upstreams still work", async (t) => {
  const up = await startUpstreams(t, ["api.test", "h2.test"]);
  const { port: h2Port } = await startH2Upstream(t, up, ["h2.test"]);
  const config = {
    rules: [
      {
        name: "h2",
        match_hosts: ["h2.test", "api.test"],
        headers: [{ name: "Authorization", type: "plaintext", value: `Bearer ${SECRET}` }],
      },
    ],
    access_control: { allow_list: ["h2.test", "api.test"] },
  };
  const p = await startProxy(t, up, config, {
    env: { WHARF_EGRESS_HOSTS: `${hostsSetting(up, ["api.test"])},h2.test:443=${up.address}:${h2Port}` },
  });

  const session = await h2Through(p, "h2.test:443");
  t.after(() => session.close());
  assert.equal(
    (session.socket as tls.TLSSocket).alpnProtocol,
    "h2",
    "the proxy speaks HTTP/2 to a client that asks for it",
  );
  const r = await h2Request(
    session,
    {
      ":method": "POST",
      ":path": "/v1/echo?x=1",
      authorization: "Bearer client-placeholder",
      te: "trailers",
      "content-type": "application/json",
    },
    '{"hello":"h2"}',
  );
  assert.equal(r.headers[":status"], 200);
  const echoed = JSON.parse(r.body) as { headers: Record<string, string>; body: string };
  assert.equal(echoed.headers.authorization, `Bearer ${SECRET}`, "the rule's value replaced the client's");
  assert.equal(echoed.headers[":authority"], "h2.test");
  assert.equal(echoed.headers[":path"], "/v1/echo?x=1");
  assert.equal(echoed.headers.te, "trailers");
  assert.equal(echoed.body, '{"hello":"h2"}');
  assert.equal(r.trailers["x-checksum"], "14", "response trailers reach the client");

  // Several streams on one connection, concurrently.
  const many = await Promise.all(
    Array.from({ length: 10 }, (_, i) => h2Request(session, { ":method": "GET", ":path": `/n/${i}` })),
  );
  assert.deepEqual(
    many.map((m) => JSON.parse(m.body).headers[":path"]),
    Array.from({ length: 10 }, (_, i) => `/n/${i}`),
  );

  // Domain fronting is refused on HTTP/2 as on HTTP/1.1: :authority must be the verified destination.
  const fronted = await h2Request(session, { ":method": "GET", ":path": "/", ":authority": "api.test" });
  assert.equal(fronted.headers[":status"], 421);

  // An HTTP/2 client to an upstream that only speaks HTTP/1.1 (the echo server): still injected.
  const s1 = await h2Through(p, "api.test:443");
  t.after(() => s1.close());
  const r1 = await h2Request(s1, { ":method": "GET", ":path": "/v1/h1-upstream" });
  assert.equal(r1.headers[":status"], 200);
  assert.equal(JSON.parse(r1.body).headers.authorization, `Bearer ${SECRET}`);
  // HEAD: the answer's headers, no body, and the session goes on.
  const head = await h2Request(s1, { ":method": "HEAD", ":path": "/v1/head" });
  assert.equal(head.headers[":status"], 200);
  assert.equal(head.body, "");
  assert.equal(
    JSON.parse((await h2Request(s1, { ":method": "GET", ":path": "/v1/after-head" })).body).headers.authorization,
    `Bearer ${SECRET}`,
  );
  assert.ok(p.audit.events.some((e) => e.kind === "inject" && e.host === "h2.test"));
  assert.ok(!JSON.stringify(p.audit.events).includes(SECRET));
});

test("gRPC (@grpc/grpc-js) through the proxy: unary and server streaming with the credential injected as metadata", async (t) => {
  const up = await startUpstreams(t, ["grpc.test"]);
  // The real gRPC server speaks plaintext HTTP/2 behind a TLS front that offers h2 with the upstream CA.
  const seen: string[] = [];
  const service: grpc.ServiceDefinition = {
    echo: {
      path: "/wharf.Test/Echo",
      requestStream: false,
      responseStream: false,
      requestSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
      requestDeserialize: (b: Buffer) => JSON.parse(b.toString()),
      responseSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
      responseDeserialize: (b: Buffer) => JSON.parse(b.toString()),
    },
    count: {
      path: "/wharf.Test/Count",
      requestStream: false,
      responseStream: true,
      requestSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
      requestDeserialize: (b: Buffer) => JSON.parse(b.toString()),
      responseSerialize: (v: unknown) => Buffer.from(JSON.stringify(v)),
      responseDeserialize: (b: Buffer) => JSON.parse(b.toString()),
    },
  };
  const server = new grpc.Server();
  server.addService(service, {
    echo: (call: grpc.ServerUnaryCall<{ text: string }, unknown>, cb: grpc.sendUnaryData<unknown>) => {
      seen.push(String(call.metadata.get("authorization")[0]));
      cb(null, { text: call.request.text, auth: call.metadata.get("authorization")[0] });
    },
    count: (call: grpc.ServerWritableStream<{ n: number }, unknown>) => {
      for (let i = 0; i < call.request.n; i++) call.write({ i });
      call.end();
    },
  });
  const grpcPort = await new Promise<number>((resolve, reject) =>
    server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) =>
      err ? reject(err) : resolve(port),
    ),
  );
  t.after(() => server.forceShutdown());
  const context = await new LeafMinter(up.ca).contextFor({ kind: "name", host: "grpc.test" });
  const open = new Set<net.Socket>();
  const front = tls.createServer({ SNICallback: (_name, cb) => cb(null, context), ALPNProtocols: ["h2"] }, (c) => {
    open.add(c);
    c.once("close", () => open.delete(c));
    const back = net.connect(grpcPort, "127.0.0.1");
    c.pipe(back).pipe(c);
    c.on("error", () => back.destroy());
    back.on("error", () => c.destroy());
  });
  const frontPort = await listen(front, up.address);
  t.after(() => new Promise((r) => (open.forEach((c) => c.destroy()), front.close(r))));

  const config = {
    rules: [
      {
        name: "grpc",
        match_hosts: ["grpc.test"],
        headers: [{ name: "Authorization", type: "plaintext", value: `Bearer ${SECRET}` }],
      },
    ],
  };
  const p = await startProxy(t, up, config, {
    env: { WHARF_EGRESS_HOSTS: `grpc.test:443=${up.address}:${frontPort}` },
  });

  // grpc-js finds the proxy the way it would in a sandbox: from the environment.
  const saved = process.env.grpc_proxy;
  process.env.grpc_proxy = p.proxyUrl;
  t.after(() => (saved === undefined ? delete process.env.grpc_proxy : (process.env.grpc_proxy = saved)));
  const Client = grpc.makeGenericClientConstructor(service, "Test");
  const client = new Client("grpc.test:443", grpc.credentials.createSsl(Buffer.from(p.sandboxCaPem))) as grpc.Client &
    Record<string, (...args: unknown[]) => unknown>;
  t.after(() => client.close());

  const meta = new grpc.Metadata();
  meta.set("authorization", "Bearer client-placeholder");
  const reply = await new Promise<{ text: string; auth: string }>((resolve, reject) =>
    client.echo({ text: "hi" }, meta, (err: Error | null, v: { text: string; auth: string }) =>
      err ? reject(err) : resolve(v),
    ),
  );
  assert.deepEqual(reply, { text: "hi", auth: `Bearer ${SECRET}` });

  const items: number[] = [];
  await new Promise<void>((resolve, reject) => {
    const call = client.count({ n: 5 }) as grpc.ClientReadableStream<{ i: number }>;
    call.on("data", (d: { i: number }) => items.push(d.i));
    call.on("end", () => resolve());
    call.on("error", reject);
  });
  assert.deepEqual(items, [0, 1, 2, 3, 4], "a server stream arrives whole, with its grpc-status trailer");
  assert.deepEqual(seen, [`Bearer ${SECRET}`]);
});

test("gRPC: a client's cancel of a server stream reaches the upstream server through the proxy", async (t) => {
  const up = await startUpstreams(t, ["api.test"]);
  const grpcUp = await startGrpcUpstream(t, up, ["grpc.test"]);
  const config = {
    rules: [
      {
        name: "grpc",
        match_hosts: ["grpc.test"],
        headers: [{ name: "Authorization", type: "plaintext", value: `Bearer ${SECRET}` }],
      },
    ],
  };
  const p = await startProxy(t, up, config, {
    env: { WHARF_EGRESS_HOSTS: `grpc.test:443=${up.address}:${grpcUp.port}` },
  });
  const Client = grpc.makeGenericClientConstructor(echoService, "Test");
  // A captured connection to grpc.test:443, as in a sandbox whose client ignores the proxy settings.
  const port = await p.transparent("grpc.test", 443);
  const options = {
    "grpc.ssl_target_name_override": "grpc.test",
    "grpc.default_authority": "grpc.test",
    "grpc.enable_http_proxy": 0,
  };
  const client = new Client(
    `127.0.0.1:${port}`,
    grpc.credentials.createSsl(Buffer.from(p.sandboxCaPem)),
    options,
  ) as grpc.Client & Record<string, (...args: unknown[]) => unknown>;
  t.after(() => client.close());
  for (let round = 1; round <= 3; round++) {
    const call = client.watch({}, { deadline: Date.now() + 20_000 }) as grpc.ClientReadableStream<{ i: number }>;
    await new Promise<void>((resolve, reject) => {
      call.on("data", (d: { i: number }) => d.i === 2 && resolve());
      call.on("error", reject);
    });
    call.on("error", () => {});
    call.cancel();
    const deadline = Date.now() + 5_000;
    while (grpcUp.cancelled < round && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.equal(
      grpcUp.cancelled,
      round,
      `cancel ${round} reached the server (an upstream stream the client left must not keep running)`,
    );
  }
  assert.equal(grpcUp.calls.filter((c) => c.method === "Watch").length, 3);
  assert.ok(grpcUp.calls.every((c) => c.metadata.authorization?.[0] === `Bearer ${SECRET}`));
});

/** The proxy with a header rule for `h2.test`, an HTTP/2-only upstream. */
async function proxyToH2Upstream(t: TestContext): Promise<TestProxy> {
  const up = await startUpstreams(t, ["h2.test"]);
  const { port } = await startH2Upstream(t, up, ["h2.test"]);
  const config = {
    rules: [
      {
        name: "h2",
        match_hosts: ["h2.test"],
        headers: [{ name: "Authorization", type: "plaintext", value: `Bearer ${SECRET}` }],
      },
    ],
  };
  return startProxy(t, up, config, { env: { WHARF_EGRESS_HOSTS: `h2.test:443=${up.address}:${port}` } });
}

test("HTTP/2: every answer arrives whole under load (16 connections, 640 requests), also when its body comes in the same read as its headers", async (t) => {
  const p = await proxyToH2Upstream(t);
  const sessions = await Promise.all(Array.from({ length: 16 }, () => h2Through(p, "h2.test:443")));
  t.after(() => sessions.forEach((s) => s.close()));
  const broken: string[] = [];
  await Promise.all(
    sessions.map(async (s, c) => {
      for (let i = 0; i < 40; i++) {
        const r = await h2Request(s, { ":method": "GET", ":path": `/load/${c}/${i}` }).catch((err: Error) => ({
          headers: {} as http2.IncomingHttpHeaders,
          body: `error: ${err.message}`,
        }));
        let path = "";
        try {
          path = (JSON.parse(r.body) as { headers: Record<string, string> }).headers[":path"];
        } catch {
          // Recorded below: a body cut short or lost is what this test is after.
        }
        if (path !== `/load/${c}/${i}`)
          broken.push(`${c}/${i}: ${r.headers[":status"]} ${JSON.stringify(r.body.slice(0, 80))}`);
      }
    }),
  );
  assert.deepEqual(broken, [], "every answer whole");
});

test("HTTP/2: streams the client resets at any moment of their exchange cost nothing but themselves", async (t) => {
  const p = await proxyToH2Upstream(t);
  // Under the rapid-reset limit per session (100 a second): 4 sessions × 40 resets.
  const sessions = await Promise.all(Array.from({ length: 4 }, () => h2Through(p, "h2.test:443")));
  t.after(() => sessions.forEach((s) => s.destroy()));
  await Promise.all(
    sessions.map(async (s) => {
      for (let i = 0; i < 40; i++) {
        const req = s.request(
          { ":method": "POST", ":path": `/reset/${i}`, expect: "100-continue" },
          { endStream: false },
        );
        req.on("error", () => {});
        req.on("data", () => {});
        // A stream whose answer came first closes before the reset: listened for from the start.
        const closed = new Promise((r) => req.once("close", r));
        // Reset before the body, after part of it, after all of it (the answer on its way back).
        if (i % 3 >= 1) req.write("abc");
        if (i % 3 === 2) req.end();
        await new Promise((r) => setTimeout(r, i % 4));
        req.close(http2.constants.NGHTTP2_CANCEL);
        await closed;
      }
    }),
  );
  const fresh = await h2Through(p, "h2.test:443");
  t.after(() => fresh.close());
  const r = await h2Request(fresh, { ":method": "GET", ":path": "/after-resets" });
  assert.equal(r.headers[":status"], 200);
  assert.equal(JSON.parse(r.body).headers.authorization, `Bearer ${SECRET}`);
});
