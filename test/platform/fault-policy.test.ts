import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  uncaughtExceptionVerdict,
  unhandledRejectionVerdict,
  type FaultVerdict,
} from "../../src/platform/fault-policy.ts";
import { onChildExit, recentRestarts, type ExitDecision } from "../../src/platform/supervisor.ts";

const withCode = (code: string) => Object.assign(new Error(code), { code });

describe("uncaughtExceptionVerdict", () => {
  const cases: Array<[string, unknown, FaultVerdict]> = [
    ["a web stream written after the client hung up", withCode("ERR_INVALID_STATE"), "contain"],
    ["a write after end", withCode("ERR_STREAM_WRITE_AFTER_END"), "contain"],
    ["a peer reset", withCode("ECONNRESET"), "contain"],
    ["a broken pipe", withCode("EPIPE"), "contain"],
    ["out of descriptors", withCode("EMFILE"), "contain"],
    ["a programming error", new TypeError("x is not a function"), "restart"],
    ["an error without a code", new Error("boom"), "restart"],
    ["a file system error", withCode("ENOENT"), "restart"],
    ["a thrown string", "boom", "restart"],
    ["a numeric code", Object.assign(new Error("x"), { code: 5 }), "restart"],
    ["null", null, "restart"],
  ];
  for (const [name, err, want] of cases)
    test(`${name}: ${want}`, () => assert.equal(uncaughtExceptionVerdict(err), want));

  test("an unhandled rejection is contained", () => assert.equal(unhandledRejectionVerdict(), "contain"));
});

describe("onChildExit", () => {
  const base = {
    code: null as number | null,
    signal: null as string | null,
    stopping: false,
    wasReady: true,
    recentRestarts: 0,
  };
  const cases: Array<[string, Partial<typeof base>, ExitDecision]> = [
    ["a graceful stop ends wharf up with the child's code", { code: 0, stopping: true }, { action: "exit", code: 0 }],
    ["a second signal's exit code passes through", { code: 130, stopping: true }, { action: "exit", code: 130 }],
    ["killed while stopping: 128 + the signal", { signal: "SIGKILL", stopping: true }, { action: "exit", code: 137 }],
    ["could not start (storage, port): not restarted", { code: 1, wasReady: false }, { action: "exit", code: 1 }],
    ["bad configuration: not restarted", { code: 2, wasReady: false }, { action: "exit", code: 2 }],
    ["a fault while serving: restarted at once", { code: 70 }, { action: "restart", delayMs: 250 }],
    ["a fault during start-up: restarted", { code: 70, wasReady: false }, { action: "restart", delayMs: 250 }],
    ["killed from elsewhere: restarted", { signal: "SIGKILL" }, { action: "restart", delayMs: 250 }],
    ["exit 1 after it served: restarted", { code: 1 }, { action: "restart", delayMs: 250 }],
    [
      "the third restart in a minute waits longer",
      { code: 70, recentRestarts: 2 },
      { action: "restart", delayMs: 1000 },
    ],
    ["a crash loop waits at most 30 s", { code: 70, recentRestarts: 50 }, { action: "restart", delayMs: 30_000 }],
  ];
  for (const [name, e, want] of cases) test(name, () => assert.deepEqual(onChildExit({ ...base, ...e }), want));

  test("restarts older than a minute are forgotten", () => {
    assert.deepEqual(recentRestarts([0, 30_000, 70_000, 100_000], 100_000), [70_000, 100_000]);
  });
});

describe("installFaultPolicy in a process", () => {
  test("an error of one stream, thrown from an event handler, is logged and contained; a programming error ends the process with 70", async () => {
    const { spawn } = await import("node:child_process");
    const fixture = new URL("./fixtures/faulty-process.ts", import.meta.url).pathname;
    const child = spawn(process.execPath, ["--import", "tsx", fixture], { stdio: ["ignore", "pipe", "pipe"] });
    let out = "";
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (out += d));
    const code = await new Promise<number | null>((r) => child.once("exit", (c) => r(c)));
    assert.equal(code, 70, out);
    assert.match(out, /ERR_INVALID_STATE[\s\S]*contained, the platform serves on/);
    assert.match(out, /a forgotten catch[\s\S]*unhandled promise rejection: contained/);
    assert.match(out, /STILL SERVING/);
    assert.match(out, /"level":60[^\n]*exiting for the supervisor/);
    assert.doesNotMatch(out, /NOT REACHED/);
  });
});
