import assert from "node:assert/strict";
import { test } from "node:test";
import { installPooledRandom } from "../../src/agent-server/runs/pooled-random.ts";

test("pooled getRandomValues: small byte arrays get fresh bytes; other calls keep Node's behaviour", () => {
  installPooledRandom();
  installPooledRandom();
  const seen = new Set<string>();
  // More than one pool's worth, so refills are exercised.
  for (let i = 0; i < 1000; i++) {
    const a = crypto.getRandomValues(new Uint8Array(16));
    assert.equal(a.length, 16);
    seen.add(Buffer.from(a).toString("hex"));
  }
  assert.equal(seen.size, 1000);
  const big = crypto.getRandomValues(new Uint8Array(4096));
  assert.ok(big.some((b) => b !== 0));
  const words = crypto.getRandomValues(new Uint32Array(4));
  assert.ok(words instanceof Uint32Array);
  assert.throws(() => crypto.getRandomValues(new Float32Array(4) as never), { name: "TypeMismatchError" });
  assert.throws(() => crypto.getRandomValues(new Uint8Array(65537)), { name: "QuotaExceededError" });
  assert.equal(crypto.getRandomValues(new Uint8Array(0)).length, 0);
});
