import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import tls from "node:tls";
import net from "node:net";
import { classifyAddress } from "../../src/egress/policy/address-class.ts";
import { canonicalHost, parseAuthority } from "../../src/egress/policy/canonical-host.ts";
import { parseClientHello } from "../../src/egress/proxy/client-hello.ts";
import { compileHostGlob } from "../../src/egress/policy/host-glob.ts";
import { normalisePath, pathMatches, compilePathPattern } from "../../src/egress/policy/path-patterns.ts";
import { CidrSet } from "../../src/egress/policy/address-class.ts";
import { policyFrom } from "./support/proxy.ts";
import { responseHeaders } from "../../src/egress/proxy/header-filter.ts";
import { auditKey } from "../../src/egress/audit/audit-batch.ts";

const name = (host: string) => ({ kind: "name" as const, host });

describe("canonical host", () => {
  const CASES: Array<[string, string | null, string?]> = [
    ["Api.Example.COM", "api.example.com", "name"],
    ["api.example.com.", "api.example.com", "name"],
    ["api.example.com..", null],
    ["127.1", "127.0.0.1", "ipv4"],
    ["0x7f.0.0.1", "127.0.0.1", "ipv4"],
    ["0x7f.1", "127.0.0.1", "ipv4"],
    ["2130706433", "127.0.0.1", "ipv4"],
    ["0177.0.0.1", "127.0.0.1", "ipv4"],
    ["127.0.0.1.", "127.0.0.1", "ipv4"],
    ["[::ffff:127.0.0.1]", "127.0.0.1", "ipv4"],
    ["::ffff:7f00:1", "127.0.0.1", "ipv4"],
    ["[::ffff:a9fe:a9fe]", "169.254.169.254", "ipv4"],
    ["[2001:DB8::1]", "2001:db8::1", "ipv6"],
    ["[fe80::1%eth0]", null],
    ["::ffff:127.0.0.1%x.allowed.com", null],
    ["1.2.3.256", null],
    ["bücher.example", "xn--bcher-kva.example", "name"],
    ["a b.com", null],
    ["a\r\nb.com", null],
    ["evil.com/x", null],
    ["user@evil.com", null],
    ["-bad.com", null],
    ["x".repeat(64) + ".com", null],
    ["example.123", null],
    ["", null],
  ];
  for (const [input, want, kind] of CASES) {
    test(`${JSON.stringify(input)} → ${want}`, () => {
      const h = canonicalHost(input);
      if (want === null) assert.equal(h, null);
      else {
        assert.equal(h?.host, want);
        assert.equal(h?.kind, kind);
      }
    });
  }
  test("authority parsing: ports, brackets, tricks", () => {
    assert.deepEqual(parseAuthority("api.test:443", null), { host: name("api.test"), port: 443 });
    assert.deepEqual(parseAuthority("[2001:db8::1]:8443", null), {
      host: { kind: "ipv6", host: "2001:db8::1" },
      port: 8443,
    });
    assert.equal(parseAuthority("api.test", null), null, "CONNECT needs a port");
    assert.equal(parseAuthority("api.test:0", null), null);
    assert.equal(parseAuthority("api.test:0443", null), null);
    assert.equal(parseAuthority("api.test:65536", null), null);
    assert.equal(parseAuthority("evil.com:443.allowed.com", null), null);
    assert.equal(parseAuthority("api.test:443:80", null), null);
    assert.deepEqual(
      parseAuthority("2001:db8::1:443", 80),
      { host: { kind: "ipv6", host: "2001:db8::1:443" }, port: 80 },
      "an unbracketed IPv6 literal has no port",
    );
  });
});

describe("host globs", () => {
  test("*.x matches subdomains, not the apex; never IP literals", () => {
    const g = compileHostGlob("*.example.com");
    assert.ok(g.matches(name("a.example.com")));
    assert.ok(g.matches(name("a.b.example.com")));
    assert.ok(!g.matches(name("example.com")));
    assert.ok(!g.matches(name("evilexample.com")));
    assert.ok(!g.matches(name("example.com.evil.com")));
    const mid = compileHostGlob("api-*.example.com");
    assert.ok(mid.matches(name("api-eu.example.com")));
    assert.ok(!mid.matches(name("api-eu.x.example.com")));
    assert.ok(compileHostGlob("127.0.0.1").matches({ kind: "ipv4", host: "127.0.0.1" }));
    assert.ok(compileHostGlob("API.Example.com.").matches(name("api.example.com")));
  });
});

describe("paths", () => {
  test("normalisation resolves dot segments and unreserved escapes", () => {
    assert.equal(normalisePath("/v1/../admin"), "/admin");
    assert.equal(normalisePath("/v1/%2e%2e/admin"), "/admin");
    assert.equal(normalisePath("/v1/%2E./admin"), "/admin");
    assert.equal(normalisePath("/v1/./x/"), "/v1/x/");
    assert.equal(normalisePath("/%61pi/%7euser"), "/api/~user");
    assert.equal(normalisePath("/a%2fb"), "/a%2Fb");
    assert.equal(normalisePath("/../../etc"), "/etc");
    assert.equal(normalisePath("/bad%zz"), null);
    assert.equal(normalisePath("relative"), null);
  });
  test("matching: exact, prefix, ambiguous paths never match restricted rules", () => {
    const pats = ["/v1/*", "/exact"].map(compilePathPattern);
    assert.ok(pathMatches(pats, "/v1/models"));
    assert.ok(pathMatches(pats, "/v1/"));
    assert.ok(!pathMatches(pats, "/v1"));
    assert.ok(pathMatches(pats, "/exact"));
    assert.ok(!pathMatches(pats, "/exact/"));
    assert.ok(!pathMatches(pats, "/v1/..%2Fadmin"));
    assert.ok(pathMatches([], "/anything%2F"));
  });
});

describe("address classification", () => {
  const CASES: Array<[string, boolean]> = [
    ["8.8.8.8", true],
    ["2606:4700::1111", true],
    ["127.0.0.1", false],
    ["127.9.9.9", false],
    ["0.0.0.0", false],
    ["0.1.2.3", false],
    ["10.1.2.3", false],
    ["172.16.0.1", false],
    ["192.168.1.1", false],
    ["100.64.0.1", false],
    ["169.254.169.254", false],
    ["224.0.0.1", false],
    ["255.255.255.255", false],
    ["198.18.0.5", false],
    ["192.0.2.1", false],
    ["::1", false],
    ["::", false],
    ["fe80::1", false],
    ["fc00::1", false],
    ["fd00:ec2::254", false],
    ["ff02::2", false],
    ["::ffff:127.0.0.1", false],
    ["::ffff:8.8.8.8", false],
    ["::7f00:1", false],
    ["64:ff9b::a9fe:a9fe", false],
    ["64:ff9b:1::1", false],
    ["2002:a00:1::1", false],
    ["2001::1", false],
    ["2001:db8::1", false],
  ];
  for (const [addr, isPublic] of CASES)
    test(`${addr} is ${isPublic ? "public" : "internal"}`, () =>
      assert.equal(classifyAddress(addr) === "public", isPublic, classifyAddress(addr)));
  test("operator ranges", () => {
    const s = new CidrSet(["10.0.0.0/8", "127.0.0.2"]);
    assert.ok(s.has("10.9.9.9") && s.has("127.0.0.2") && !s.has("127.0.0.1"));
  });
});

describe("access decisions (policy)", () => {
  const opts = { allowInternal: new CidrSet([]), isSelf: () => false };
  const decide = async (access: unknown, host: string, port: number, address = "8.8.4.4") => {
    const p = await policyFrom({ access_control: access });
    const h = canonicalHost(host)!;
    const v = p.connectionVerdict(h, port);
    if (v.kind === "deny") return { ok: false, raw: false, why: v.reason };
    const problem = p.addressVerdict(v, address, port, opts);
    return { ok: problem === null, raw: v.raw, why: problem };
  };
  test("default: 80/443 anywhere, nothing else", async () => {
    const p = await policyFrom({});
    assert.equal(p.connectionVerdict(name("a.com"), 443).kind, "allow");
    assert.equal(p.connectionVerdict(name("a.com"), 80).kind, "allow");
    for (const port of [22, 5432, 6379, 853, 8443]) assert.equal(p.connectionVerdict(name("a.com"), port).kind, "deny");
  });
  test("allow_list: the six forms", async () => {
    const allow = {
      allow_list: ["api.com", "db.com:5432", "*.svc.com", "~^r[0-9]+\\.re\\.com$", "8.8.4.0/24", "[2606:4700::1]:8443"],
    };
    assert.ok((await decide(allow, "api.com", 443)).ok);
    assert.ok((await decide(allow, "api.com", 80)).ok);
    assert.ok(!(await decide(allow, "api.com", 8080)).ok);
    assert.ok(!(await decide(allow, "other.com", 443, "1.1.1.1")).ok, "default deny, HTTP(S) included");
    assert.deepEqual(await decide(allow, "db.com", 5432), { ok: true, raw: true, why: null });
    assert.ok(!(await decide(allow, "db.com", 443, "1.1.1.1")).ok, "host:PORT is not additive with 80/443");
    assert.ok((await decide(allow, "a.svc.com", 443)).ok);
    assert.ok(!(await decide(allow, "svc.com", 443, "1.1.1.1")).ok, "apex excluded");
    assert.ok((await decide(allow, "r12.re.com", 443)).ok);
    assert.ok(!(await decide(allow, "r12.re.com.evil.com", 443, "1.1.1.1")).ok, "regex anchored at the end");
    assert.ok(!(await decide(allow, "xr12.re.com", 443, "1.1.1.1")).ok, "regex anchored at the start");
    assert.ok((await decide(allow, "8.8.4.4", 443)).ok, "CIDR allows HTTP(S)");
    assert.ok(!(await decide(allow, "8.8.4.4", 5432)).ok, "CIDR cannot open raw TCP");
    assert.ok(
      !(await decide(allow, "anything.com", 443, "8.8.4.9")).ok,
      "a CIDR allows addresses, never a name (which is then not even resolved)",
    );
    assert.deepEqual(await decide(allow, "[2606:4700::1]", 8443, "2606:4700::1"), { ok: true, raw: true, why: null });
    assert.ok(!(await decide(allow, "[2606:4700::1]", 443, "2606:4700::1")).ok);
  });
  test("deny_list: default allow for HTTP(S), no raw TCP, CIDRs block by address", async () => {
    const deny = { deny_list: ["evil.com", "*.bad.com", "9.9.9.0/24"] };
    assert.ok((await decide(deny, "good.com", 443)).ok);
    assert.ok(!(await decide(deny, "evil.com", 443)).ok);
    assert.ok(!(await decide(deny, "EVIL.com.", 443)).ok, "canonical host");
    assert.ok(!(await decide(deny, "x.bad.com", 80)).ok);
    assert.ok((await decide(deny, "bad.com", 80)).ok, "apex not included");
    assert.ok(!(await decide(deny, "good.com", 443, "9.9.9.9")).ok, "a name resolving into a denied CIDR");
    assert.ok(!(await decide(deny, "good.com", 5432)).ok, "a deny list cannot open raw TCP");
  });
  test("internal addresses are never opened by proxy_config", async () => {
    for (const access of [{ allow_list: ["10.0.0.0/8", "127.0.0.0/8", "db.internal:5432"] }, undefined]) {
      assert.ok(!(await decide(access, "10.1.2.3", 443, "10.1.2.3")).ok);
      assert.ok(!(await decide(access, "127.0.0.1", 443, "127.0.0.1")).ok);
    }
    assert.ok(!(await decide({ allow_list: ["db.internal:5432"] }, "db.internal", 5432, "10.0.0.5")).ok);
  });
  test("hostile regex input is linear", async () => {
    const p = await policyFrom({ access_control: { allow_list: ["~(a+)+b", "~(a|aa)*c", "~(.*a){20}"] } });
    const host = name("a".repeat(60) + "." + "a".repeat(60) + "." + "a".repeat(60) + ".test");
    const t0 = performance.now();
    for (let i = 0; i < 20; i++) assert.equal(p.connectionVerdict(host, 443).kind, "deny");
    assert.ok(performance.now() - t0 < 1000, `took ${performance.now() - t0} ms`);
  });
  test("first matching header rule wins; disabled rules are skipped", async () => {
    const h = (v: string) => [{ name: "Authorization", type: "plaintext", value: v }];
    const p = await policyFrom({
      rules: [
        { name: "off", enabled: false, match_hosts: ["api.com"], headers: h("off") },
        { name: "v1", match_hosts: ["api.com"], match_paths: ["/v1/*"], headers: h("one") },
        { name: "all", match_hosts: ["*.api.com", "api.com"], headers: h("all") },
        { name: "late", match_hosts: ["api.com"], headers: h("late") },
      ],
    });
    assert.equal(p.headerRuleFor(name("api.com"), "/v1/x")?.name, "v1");
    assert.equal(p.headerRuleFor(name("api.com"), "/v2")?.name, "all");
    assert.equal(p.headerRuleFor(name("x.api.com"), "/v1/x")?.name, "all");
    assert.equal(p.headerRuleFor(name("other.com"), "/"), null);
  });
});

describe("ClientHello parsing", () => {
  async function realHello(servername?: string): Promise<Buffer> {
    return new Promise((resolve) => {
      const srv = net.createServer((s) =>
        s.once("data", (d) => {
          resolve(d);
          s.destroy();
          srv.close();
        }),
      );
      srv.listen(0, "127.0.0.1", () => {
        const c = tls.connect({
          host: "127.0.0.1",
          port: (srv.address() as net.AddressInfo).port,
          servername,
          rejectUnauthorized: false,
        });
        c.on("error", () => {});
      });
    });
  }
  test("reads SNI from one read, from a TCP split and from a record split", async () => {
    const hello = await realHello("api.test");
    assert.deepEqual(parseClientHello(hello, 65536), { status: "ok", serverName: "api.test" });
    assert.deepEqual(parseClientHello(hello.subarray(0, 40), 65536), { status: "need-more" });
    // Re-frame the handshake into two records.
    const hs = hello.subarray(5);
    const cut = 30;
    const rec = (b: Buffer) => Buffer.concat([Buffer.from([0x16, 0x03, 0x01, b.length >> 8, b.length & 255]), b]);
    assert.deepEqual(parseClientHello(Buffer.concat([rec(hs.subarray(0, cut)), rec(hs.subarray(cut))]), 65536), {
      status: "ok",
      serverName: "api.test",
    });
    const noSni = await realHello(undefined);
    assert.deepEqual(parseClientHello(noSni, 65536), { status: "ok", serverName: null });
  });
  test("ambiguous or malformed hellos are invalid", async () => {
    const hello = await realHello("api.test");
    assert.equal(parseClientHello(hello, 100).status, "invalid", "over the cap");
    const bad = Buffer.from(hello);
    bad[5] = 0x02; // not a ClientHello
    assert.equal(parseClientHello(bad, 65536).status, "invalid");
    const i = hello.indexOf(Buffer.from("api.test"));
    const twoNames = Buffer.from(hello);
    twoNames[i - 3] = 1; // host_name type → other type
    assert.equal(parseClientHello(twoNames, 65536).status, "invalid");
    const ctl = Buffer.from(hello);
    ctl[i] = 0x0a;
    assert.equal(parseClientHello(ctl, 65536).status, "invalid");
    assert.equal(parseClientHello(Buffer.from("GET / HTTP/1.1\r\n"), 65536).status, "invalid");
  });
});

describe("leaf certificates", () => {
  test("bounded cache under many attacker-chosen names; one mint for concurrent first requests", async () => {
    const { createCa, LeafMinter } = await import("../../src/egress/proxy/certificates.ts");
    const m = new LeafMinter(await createCa("unit CA"), 50);
    await Promise.all(Array.from({ length: 40 }, () => m.contextFor({ kind: "name", host: "same.example.com" })));
    assert.equal(m.minted, 1, "single-flight");
    for (let i = 0; i < 300; i++)
      await m.contextFor({ kind: "name", host: `n${crypto.randomUUID().slice(0, 8)}.example.com` });
    assert.ok(m.size <= 50, `cache bounded: ${m.size}`);
    const ipPem = await m.certificatePem({ kind: "ipv6", host: "2001:db8::1" });
    const cert = new (await import("node:crypto")).X509Certificate(ipPem);
    assert.match(cert.subjectAltName ?? "", /IP Address:2001:DB8:0:0:0:0:0:1/i);
  });
});

describe("response headers relayed to the sandbox", () => {
  const CASES: Array<[string, string[], string[]]> = [
    [
      "hop-by-hop dropped",
      ["Content-Type", "a/b", "Connection", "keep-alive", "Keep-Alive", "timeout=5", "Transfer-Encoding", "chunked"],
      ["Content-Type", "a/b"],
    ],
    ["headers named by Connection dropped", ["Connection", "close, X-Hop", "X-Hop", "1", "X-End", "2"], ["X-End", "2"]],
    ["Connection in any case", ["CONNECTION", "Keep-Alive", "x-a", "1"], ["x-a", "1"]],
    [
      "repeats and order kept",
      ["Set-Cookie", "a=1", "X", "y", "Set-Cookie", "b=2"],
      ["Set-Cookie", "a=1", "X", "y", "Set-Cookie", "b=2"],
    ],
  ];
  for (const [what, raw, want] of CASES) test(what, () => assert.deepEqual(responseHeaders(raw), want));
});

test("audit key: events differing in any recorded field are different rows", () => {
  const base = {
    sandboxId: "s",
    workspaceId: "w",
    kind: "inject",
    decision: "injected",
    rule: "r",
    host: "h",
    port: 443,
    method: "GET",
    path: "/p",
  } as const;
  const keys = new Set(
    [
      base,
      { ...base, rule: undefined },
      { ...base, port: 80 },
      { ...base, path: "/q" },
      { ...base, method: "POST" },
      { ...base, reason: "x" },
      { ...base, sandboxId: "t" },
    ].map((e) => auditKey(e as never)),
  );
  assert.equal(keys.size, 7);
  assert.equal(
    auditKey({ ...base } as never),
    auditKey({ ...base, workspaceId: "other" } as never),
    "the workspace follows from the sandbox",
  );
});
