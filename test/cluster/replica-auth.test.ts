import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { NonceCache, signRequest, verifyRequest, type Refusal } from "../../src/cluster/replica-auth.ts";
import { sandboxOfTarget } from "../../src/sandboxes/workload-owner.ts";

const KEY = Buffer.alloc(32, 1);
const keyFor = () => ({ kid: "k1", key: KEY });
const lookup = (kid: string) => (kid === "k1" ? KEY : null);
const NOW = 1_700_000_000_000;
const NONCE = "AAAAAAAAAAAAAAAA";
const base = { from: "node-a", to: "node-b", method: "POST", target: "/sandboxes/dp/x/execute" };

describe("signed requests between replicas", () => {
  const cases: Array<
    [
      string,
      () => string | undefined,
      Partial<{ self: string; method: string; target: string; now: number }>,
      Refusal | "ok",
    ]
  > = [
    ["valid", () => signRequest(keyFor, base, NOW, 15_000, NONCE), {}, "ok"],
    ["missing", () => undefined, {}, "missing"],
    ["not v1", () => signRequest(keyFor, base, NOW, 15_000, NONCE).replace(/^v1/, "v2"), {}, "malformed"],
    ["for another replica", () => signRequest(keyFor, base, NOW, 15_000, NONCE), { self: "node-c" }, "wrong-replica"],
    ["unknown key id", () => signRequest(() => ({ kid: "k9", key: KEY }), base, NOW, 15_000, NONCE), {}, "unknown-key"],
    [
      "other key",
      () => signRequest(() => ({ kid: "k1", key: Buffer.alloc(32, 2) }), base, NOW, 15_000, NONCE),
      {},
      "bad-signature",
    ],
    [
      "other target",
      () => signRequest(keyFor, base, NOW, 15_000, NONCE),
      { target: "/sandboxes/dp/y/execute" },
      "bad-signature",
    ],
    ["other method", () => signRequest(keyFor, base, NOW, 15_000, NONCE), { method: "GET" }, "bad-signature"],
    ["expired", () => signRequest(keyFor, base, NOW - 15_001, 15_000, NONCE), {}, "expired"],
    ["too far ahead", () => signRequest(keyFor, base, NOW, 60_000, NONCE), {}, "too-far-ahead"],
  ];
  for (const [name, header, over, want] of cases) {
    test(name, () => {
      const v = verifyRequest(
        lookup,
        header(),
        { self: over.self ?? "node-b", method: over.method ?? base.method, target: over.target ?? base.target },
        over.now ?? NOW,
        () => false,
      );
      assert.equal(v.ok ? "ok" : v.reason, want);
    });
  }

  test("a nonce is accepted once until it expires", () => {
    const cache = new NonceCache();
    const header = signRequest(keyFor, base, NOW, 15_000, NONCE);
    const check = (now: number) =>
      verifyRequest(lookup, header, { self: "node-b", method: base.method, target: base.target }, now, (n, exp) =>
        cache.seen(n, exp, now),
      );
    assert.equal(check(NOW).ok, true);
    const again = check(NOW + 1);
    assert.equal(again.ok ? "ok" : again.reason, "replayed");
    // Past its expiry the header is refused as expired, and the cache forgets the nonce.
    const late = check(NOW + 16_000);
    assert.equal(late.ok ? "ok" : late.reason, "expired");
    cache.seen("BBBBBBBBBBBBBBBB", NOW + 40_000, NOW + 20_000);
    assert.equal(cache.size, 1);
  });
});

describe("the sandbox a data-plane target names", () => {
  const link = (t: string) => (t === "tok" ? "sb-from-link" : null);
  const cases: Array<[string, string | null]> = [
    ["/sandboxes/dp/abc/execute", "abc"],
    ["/sandboxes/dp/abc/execute/ws?x=1", "abc"],
    ["/sandboxes/dp/abc", "abc"],
    ["/sandboxes/service/abc/8000/index.html", "abc"],
    ["/sandboxes/download/tok", "sb-from-link"],
    ["/sandboxes/download/forged", null],
    ["/v2/sandboxes/boxes/abc", null],
    ["/sandboxes/dpx/abc", null],
    ["/deployments/abc/runs", null],
  ];
  for (const [target, want] of cases) test(target, () => assert.equal(sandboxOfTarget(target, link), want));
});
