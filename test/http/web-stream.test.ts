import assert from "node:assert/strict";
import { PassThrough } from "node:stream";
import { describe, test } from "node:test";
import { guardController, webStreamOf } from "../../src/http/web-stream.ts";

const tick = () => new Promise((r) => setImmediate(r));

/** Collects what would be an uncaught exception while `fn` runs (and a few ticks after). */
async function uncaughtDuring(fn: () => Promise<void>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const record = (err: unknown) => seen.push(err);
  process.on("uncaughtException", record);
  try {
    await fn();
    for (let i = 0; i < 5; i++) await tick();
  } finally {
    process.off("uncaughtException", record);
  }
  return seen;
}

describe("webStreamOf", () => {
  const afterCancel: Array<[string, (out: PassThrough) => void]> = [
    ["end", (out) => out.end()],
    ["more data, then end", (out) => (out.write(Buffer.alloc(1024)), out.end())],
    ["an error", (out) => out.emit("error", new Error("late"))],
  ];
  for (const [name, late] of afterCancel) {
    test(`the source emitting ${name} after the consumer cancelled throws nothing`, async () => {
      const out = new PassThrough();
      let cancelled = 0;
      const stream = webStreamOf(out, () => cancelled++);
      const reader = stream.getReader();
      out.write(Buffer.from("first"));
      assert.equal(Buffer.from((await reader.read()).value!).toString(), "first");
      const errors = await uncaughtDuring(async () => {
        await reader.cancel();
        late(out);
      });
      assert.deepEqual(errors, []);
      assert.equal(cancelled, 1);
      assert.ok(out.destroyed, "the Node stream is released");
    });
  }

  test("the source's data, then end, arrives whole and closes the stream", async () => {
    const out = new PassThrough();
    const stream = webStreamOf(out, () => assert.fail("not cancelled"));
    out.write("a");
    out.write("b");
    out.end("c");
    let text = "";
    for await (const chunk of stream) text += Buffer.from(chunk).toString();
    assert.equal(text, "abc");
  });

  test("a slow consumer pauses the source (backpressure)", async () => {
    const out = new PassThrough();
    const stream = webStreamOf(out, () => {});
    const reader = stream.getReader();
    out.write(Buffer.alloc(16));
    await tick();
    assert.ok(out.isPaused(), "paused once the queue is full");
    await reader.read();
    assert.ok(!out.isPaused(), "resumed when the consumer pulls");
    await reader.cancel();
  });
});

describe("guardController", () => {
  const uses: Array<[string, (g: ReturnType<typeof guardController<string>>) => void]> = [
    ["enqueue", (g) => g.enqueue("x")],
    ["close", (g) => g.close()],
    ["error", (g) => g.error(new Error("x"))],
  ];
  for (const [name, use] of uses) {
    test(`${name} after cancel is a no-op`, async () => {
      let guard!: ReturnType<typeof guardController<string>>;
      const stream = new ReadableStream<string>({
        start: (c) => void (guard = guardController(c)),
        cancel: () => guard.cancelled(),
      });
      await stream.cancel();
      assert.doesNotThrow(() => use(guard));
      assert.equal(guard.open, false);
    });
  }

  test("close after close is a no-op", () => {
    let guard!: ReturnType<typeof guardController<string>>;
    new ReadableStream<string>({ start: (c) => void (guard = guardController(c)) });
    guard.close();
    assert.doesNotThrow(() => guard.close());
    assert.doesNotThrow(() => guard.enqueue("late"));
  });
});
