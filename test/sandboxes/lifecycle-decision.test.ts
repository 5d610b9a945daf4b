import assert from "node:assert/strict";
import { test } from "node:test";
import {
  nextAction,
  type LifecycleAction,
  type LifecycleFacts,
} from "../../src/sandboxes/lifecycle/lifecycle-decision.ts";

const NOW = 1_000_000_000;
const times = { provisionDeadlineMs: 60_000, deleteDeadlineMs: 30_000, ttlSecondMs: 1000 };
const base: LifecycleFacts = {
  status: "ready",
  statusChangedAt: NOW - 1000,
  stoppedAt: null,
  idleTtlSeconds: 0,
  deleteAfterStopSeconds: 0,
  held: false,
  inflight: false,
  running: true,
  activeProcesses: 0,
  lastActivity: NOW - 1000,
};

test("lifecycle decision: one action per sandbox and tick, from its status, deadlines, TTLs and what runs", () => {
  const cases: Array<[string, Partial<LifecycleFacts>, LifecycleAction]> = [
    ["a stop or delete holds it", { held: true, running: false }, "none"],
    [
      "provisioning within its deadline",
      { status: "provisioning", statusChangedAt: NOW - 59_000, inflight: true },
      "none",
    ],
    ["provisioning exactly at its deadline", { status: "provisioning", statusChangedAt: NOW - 60_000 }, "none"],
    [
      "provisioning past its deadline, nothing here works on it",
      { status: "provisioning", statusChangedAt: NOW - 61_000 },
      "fail-provision",
    ],
    [
      "provisioning past its deadline while this process still does",
      { status: "provisioning", statusChangedAt: NOW - 61_000, inflight: true },
      "teardown-fail-provision",
    ],
    [
      "a held provisioning past its deadline",
      { status: "provisioning", statusChangedAt: NOW - 61_000, held: true },
      "none",
    ],
    ["deleting within its deadline", { status: "deleting", statusChangedAt: NOW - 10_000 }, "none"],
    ["deleting past its deadline", { status: "deleting", statusChangedAt: NOW - 31_000 }, "retry-delete"],
    [
      "deleting past its deadline, still in flight",
      { status: "deleting", statusChangedAt: NOW - 31_000, inflight: true },
      "none",
    ],
    ["ready whose init process is gone", { running: false }, "fail-exited"],
    ["ready, not live in this process", { running: false, lastActivity: null }, "fail-exited"],
    [
      "ready and at work, long idle before",
      { activeProcesses: 2, idleTtlSeconds: 10, lastActivity: NOW - 60_000 },
      "touch",
    ],
    ["ready, idle within its TTL", { idleTtlSeconds: 10, lastActivity: NOW - 9_000 }, "none"],
    ["ready, idle past its TTL", { idleTtlSeconds: 10, lastActivity: NOW - 11_000 }, "idle-stop"],
    ["ready, no idle TTL", { idleTtlSeconds: 0, lastActivity: NOW - 1e9 }, "none"],
    ["stopped, no delete TTL", { status: "stopped", stoppedAt: NOW - 1e9 }, "none"],
    [
      "stopped within delete_after_stop_seconds",
      { status: "stopped", stoppedAt: NOW - 5_000, deleteAfterStopSeconds: 10 },
      "none",
    ],
    [
      "stopped past delete_after_stop_seconds",
      { status: "stopped", stoppedAt: NOW - 11_000, deleteAfterStopSeconds: 10 },
      "expire",
    ],
    ["stopped with no stop time recorded", { status: "stopped", stoppedAt: null, deleteAfterStopSeconds: 10 }, "none"],
    ["failed is left to the user", { status: "failed", running: false, statusChangedAt: 0 }, "none"],
    ["the TTL second is the tests' shortened one", { idleTtlSeconds: 10, lastActivity: NOW - 200 }, "none"],
  ];
  for (const [name, facts, want] of cases) assert.equal(nextAction({ ...base, ...facts }, NOW, times), want, name);
  assert.equal(
    nextAction({ ...base, idleTtlSeconds: 10, lastActivity: NOW - 200 }, NOW, { ...times, ttlSecondMs: 10 }),
    "idle-stop",
    "a 10 ms TTL second",
  );
});
