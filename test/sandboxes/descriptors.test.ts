import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { describe, test } from "node:test";
import { isOutOfDescriptors, retryOutOfDescriptors } from "../../src/confinement/descriptors.ts";

const err = (code: string, cause?: unknown) => Object.assign(new Error(code), { code }, cause ? { cause } : {});

describe("out of descriptors", () => {
  const cases: Array<[string, unknown, boolean]> = [
    ["EMFILE", err("EMFILE"), true],
    ["ENFILE", err("ENFILE"), true],
    ["wrapped with { cause }", new Error("teardown failed", { cause: err("EMFILE") }), true],
    ["ENOENT", err("ENOENT"), false],
    ["no code", new Error("x"), false],
    ["not an object", "EMFILE", false],
  ];
  for (const [name, e, want] of cases) test(`${name}: ${want}`, () => assert.equal(isOutOfDescriptors(e), want));

  test("retries while out of descriptors, with growing delays, then returns", async () => {
    const slept: number[] = [];
    let calls = 0;
    const v = await retryOutOfDescriptors(
      async () => {
        if (++calls < 3) throw err("EMFILE");
        return "done";
      },
      { sleep: async (ms) => void slept.push(ms) },
    );
    assert.equal(v, "done");
    assert.deepEqual(slept, [100, 200]);
  });

  test("any other error is thrown at once; a shortage that lasts is thrown after the last attempt", async () => {
    let calls = 0;
    await assert.rejects(
      retryOutOfDescriptors(
        async () => {
          calls++;
          throw err("ENOENT");
        },
        { sleep: async () => {} },
      ),
      /ENOENT/,
    );
    assert.equal(calls, 1);
    calls = 0;
    await assert.rejects(
      retryOutOfDescriptors(
        async () => {
          calls++;
          throw err("EMFILE");
        },
        { attempts: 4, sleep: async () => {} },
      ),
      /EMFILE/,
    );
    assert.equal(calls, 4);
  });

  test("a process at its descriptor limit is not taken for gone", (t) => {
    if (process.platform !== "linux" || spawnSync("prlimit", ["--version"]).status !== 0)
      return t.skip("needs Linux and prlimit");
    const fixture = new URL("./fixtures/proc-at-fd-limit.ts", import.meta.url).pathname;
    const r = spawnSync("prlimit", ["--nofile=256:256", process.execPath, "--import", "tsx", fixture], {
      encoding: "utf8",
    });
    assert.equal(r.status, 0, r.stderr);
    const out = JSON.parse(r.stdout.trim().split("\n").pop()!) as { held: number; answer: string; afterwards: boolean };
    assert.ok(out.held > 0);
    assert.equal(out.answer, "threw EMFILE", "reading /proc without a descriptor is not an answer");
    assert.equal(out.afterwards, true);
  });
});
