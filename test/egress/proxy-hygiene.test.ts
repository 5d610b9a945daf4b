/** Connection hygiene: slow headers and slow handshakes are cut, a per-sandbox cap, only websocket upgrades, DNS always answers. */
import assert from "node:assert/strict";
import net from "node:net";
import { test } from "node:test";
import dnsPacket from "dns-packet";
import { FakeDns, errorAnswer } from "../../src/egress/capture/fake-dns.ts";
import { startProxy } from "./support/proxy.ts";
import { hostsSetting, startUpstreams } from "./support/upstreams.ts";

/** Sends `first`, then one more byte-or-line every `everyMs` forever; resolves how long until the proxy closed it. */
function dribble(port: number, first: Buffer | string, next: () => Buffer | string, everyMs: number): Promise<number> {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const s = net.connect(port, "127.0.0.1", () => s.write(first));
    const timer = setInterval(() => s.writable && s.write(next()), everyMs);
    const done = () => (clearInterval(timer), resolve(Date.now() - t0));
    s.on("data", () => {});
    s.on("close", done);
    s.on("error", () => {});
  });
}

function rawRequest(port: number, text: string): Promise<string> {
  return new Promise((resolve) => {
    let out = "";
    const s = net.connect(port, "127.0.0.1", () => s.write(text));
    s.setEncoding("utf8");
    s.on("data", (d: string) => (out += d));
    s.on("close", () => resolve(out));
    s.on("error", () => resolve(out));
    setTimeout(() => s.destroy(), 5_000).unref();
  });
}

test("slow headers and a slow ClientHello are cut at the header timeout; a slow but complete request is not", async (t) => {
  const up = await startUpstreams(t, ["api.test"]);
  const p = await startProxy(
    t,
    up,
    { rules: [] },
    { env: { WHARF_EGRESS_HOSTS: hostsSetting(up, ["api.test"]), WHARF_EGRESS_HEADER_TIMEOUT_MS: "1000" } },
  );
  const explicitPort = Number(new URL(p.proxyUrl).port);
  const tlsPort = await p.transparent("api.test", 443);
  let n = 0;
  const [headers, hello] = await Promise.all([
    // Slowloris on the explicit proxy: a header line every 200 ms, never the blank line.
    dribble(explicitPort, "GET http://api.test/ HTTP/1.1\r\nHost: api.test\r\n", () => `X-${n++}: y\r\n`, 200),
    // A TLS record header announcing a ClientHello, then a byte every 200 ms.
    dribble(tlsPort, Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]), () => Buffer.from([0]), 200),
  ]);
  // Node checks header timeouts once a second at most: cut between 1 and ~3 s, far below the default 10 s.
  assert.ok(headers >= 900 && headers < 4_000, `slow headers cut after ${headers} ms`);
  assert.ok(hello >= 900 && hello < 3_000, `slow ClientHello cut after ${hello} ms`);
  const ok = await rawRequest(
    explicitPort,
    "GET http://api.test/ok HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n",
  );
  assert.match(ok, /^HTTP\/1.1 200/);
});

test("a sandbox's concurrent connections are capped with a clear refusal; closing one frees a slot", async (t) => {
  const up = await startUpstreams(t, ["api.test"]);
  const p = await startProxy(
    t,
    up,
    { rules: [] },
    { env: { WHARF_EGRESS_HOSTS: hostsSetting(up, ["api.test"]), WHARF_EGRESS_MAX_CONNECTIONS: "3" } },
  );
  const port = Number(new URL(p.proxyUrl).port);
  const held = await Promise.all(
    [1, 2, 3].map(
      () =>
        new Promise<net.Socket>((r) => {
          const s = net.connect(port, "127.0.0.1", () => r(s));
          s.on("error", () => {});
        }),
    ),
  );
  await new Promise((r) => setTimeout(r, 100));
  const refused = await rawRequest(port, "GET http://api.test/x HTTP/1.1\r\nHost: api.test\r\n\r\n");
  assert.match(refused, /^HTTP\/1.1 503[^]*too many concurrent connections from this sandbox \(the limit is 3\)/);
  assert.ok(p.audit.events.some((e) => e.kind === "block" && /too many concurrent connections/.test(e.reason ?? "")));
  held[0].destroy();
  await new Promise((r) => setTimeout(r, 100));
  assert.match(
    await rawRequest(port, "GET http://api.test/x HTTP/1.1\r\nHost: api.test\r\nConnection: close\r\n\r\n"),
    /^HTTP\/1.1 200/,
  );
  for (const s of held) s.destroy();
});

test("only websocket upgrades: h2c and other tokens are refused with 400 before anything is dialled", async (t) => {
  const up = await startUpstreams(t, ["api.test"]);
  const p = await startProxy(t, up, { rules: [] }, { env: { WHARF_EGRESS_HOSTS: hostsSetting(up, ["api.test"]) } });
  const port = await p.transparent("api.test", 80);
  const before = up.seen.length;
  for (const token of ["h2c", "TLS/1.2", "websocket2", "foo"]) {
    const extra =
      token === "h2c"
        ? "HTTP2-Settings: AAMAAABkAAQAoAAAAAIAAAAA\r\nConnection: Upgrade, HTTP2-Settings\r\n"
        : "Connection: Upgrade\r\n";
    const r = await rawRequest(port, `GET / HTTP/1.1\r\nHost: api.test\r\nUpgrade: ${token}\r\n${extra}\r\n`);
    assert.match(r, /^HTTP\/1.1 400[^]*only websocket upgrades/, token);
  }
  assert.equal(up.seen.length, before, "nothing reached the upstream");
  assert.ok(p.audit.events.some((e) => e.kind === "block" && /upgrade to "h2c" refused/.test(e.reason ?? "")));
});

test("DNS: over-long and undecodable names get an error answer (NXDOMAIN, id and question echoed), never silence", () => {
  const dns = new FakeDns();
  const long = ["a".repeat(63), "b".repeat(63), "c".repeat(63), "d".repeat(60)].join(".") + ".com"; // 258 characters
  const query = (name: string) =>
    dnsPacket.encode({
      type: "query",
      id: 4242,
      flags: dnsPacket.RECURSION_DESIRED,
      questions: [{ type: "A", name, class: "IN" }],
    });
  for (const [name, rcode] of [
    [long, 3],
    ["x".repeat(70) + ".com", 1],
  ] as const) {
    const a = dns.answer(query(name));
    assert.ok(a, `${name.length} characters: answered`);
    assert.equal(a.readUInt16BE(0), 4242);
    assert.equal(a[2] & 0x80, 0x80, "a response");
    assert.equal(a[3] & 0x0f, rcode, rcode === 3 ? "NXDOMAIN" : "FORMERR (a 70-byte label cannot be echoed)");
  }
  const ok = dns.answer(query("ok.test"))!;
  assert.equal(ok[3] & 0x0f, 0, "NOERROR");
  assert.equal(dnsPacket.decode(ok).answers?.length, 1);
  assert.equal(
    errorAnswer(Buffer.from([1, 2, 0x80, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1]), 3),
    null,
    "a response is never answered",
  );
  assert.equal(errorAnswer(Buffer.from([1, 2]), 3), null, "a runt is never answered");
});
