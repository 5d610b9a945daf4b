import assert from "node:assert/strict";
import { test } from "node:test";
import { BuildQueue } from "../../src/sandboxes/images/build-queue.ts";
import { TarScanner, tarSize } from "../../src/sandboxes/driver/layer-bound.ts";

test("the snapshot build queue runs at most its limit at once, in order, and survives failing jobs", async () => {
  for (const [limit, jobs] of [
    [1, 4],
    [2, 7],
    [3, 2],
  ]) {
    const q = new BuildQueue(limit);
    let running = 0;
    let peak = 0;
    const order: number[] = [];
    const results = await Promise.allSettled(
      Array.from({ length: jobs }, (_, i) =>
        q.run(async () => {
          running++;
          peak = Math.max(peak, running);
          await new Promise((r) => setTimeout(r, 5));
          order.push(i);
          running--;
          if (i % 3 === 1) throw new Error(`job ${i}`);
          return i;
        }),
      ),
    );
    assert.equal(peak, Math.min(limit, jobs));
    assert.equal(
      results.filter((r) => r.status === "rejected").length,
      Array.from({ length: jobs }, (_, i) => i).filter((i) => i % 3 === 1).length,
    );
    assert.equal(q.ahead, 0);
    if (limit === 1) assert.deepEqual(order, [0, 1, 2, 3]);
  }
});

function header(type: string, size: number): Buffer {
  const h = Buffer.alloc(512);
  h.write("name", 0);
  h.write(size.toString(8).padStart(11, "0"), 124);
  h.write(type, 156);
  return h;
}

test("tar scanning finds sparse entries (GNU and PAX) wherever chunks split, and counts bytes", () => {
  const file = Buffer.concat([header("0", 600), Buffer.alloc(1024)]);
  const pax = (text: string) =>
    Buffer.concat([header("x", text.length), Buffer.from(text), Buffer.alloc(512 - text.length)]);
  const cases: Array<[string, Buffer, boolean]> = [
    ["plain file", file, false],
    ["GNU sparse", Buffer.concat([header("S", 0), file]), true],
    ["PAX sparse", Buffer.concat([pax("30 GNU.sparse.major=1\n"), file]), true],
    ["PAX path only", Buffer.concat([pax("14 path=a/b/c\n"), file]), false],
  ];
  for (const [name, tar, sparse] of cases) {
    for (const step of [1, 7, 512, 100000]) {
      const s = new TarScanner();
      for (let i = 0; i < tar.length; i += step) s.push(tar.subarray(i, i + step));
      assert.equal(s.sparse, sparse, `${name} in chunks of ${step}`);
      assert.equal(s.bytes, tar.length);
    }
  }
  assert.equal(tarSize(Buffer.from("00000001000\0")), 512);
  assert.equal(tarSize(Buffer.from([0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0])), 256);
});
