import assert from "node:assert/strict";
import { test } from "node:test";
import {
  mayClaim,
  ownerGone,
  readFreeLocks,
  type FreeLocks,
  type PresenceView,
} from "../../src/deployments/rollout/owner-gone.ts";

const pg: PresenceView = { supported: true, selfHeldForMs: 60_000, dbUpMs: 3_600_000, graceMs: 1000, leaseMs: 5000 };

test("takeover decision: another process is gone (before its lease runs out) only on a free presence lock that stays free, seen by a process that holds its own, on a database up for longer than a lease", () => {
  const cases: Array<[string, { owner?: string; freeForMs: number | null; view?: Partial<PresenceView> }, boolean]> = [
    ["its lock is held (alive, maybe stalled: the lease decides)", { freeForMs: null }, false],
    ["its lock free for the whole grace (killed: its session ended)", { freeForMs: 1000 }, true],
    ["its lock free for longer", { freeForMs: 4000 }, true],
    ["its lock just seen free (maybe a dropped connection it is replacing)", { freeForMs: 0 }, false],
    ["its lock free for less than the grace", { freeForMs: 999 }, false],
    ["SQLite: no presence locks, the lease alone", { freeForMs: 10_000, view: { supported: false } }, false],
    ["the owner is this process", { owner: "me", freeForMs: 10_000 }, false],
    [
      "this process does not hold its own lock (its connection or the database failed)",
      { freeForMs: 10_000, view: { selfHeldForMs: null } },
      false,
    ],
    ["this process took its own lock again just now", { freeForMs: 10_000, view: { selfHeldForMs: 500 } }, false],
    ["this process has held its own for the grace", { freeForMs: 10_000, view: { selfHeldForMs: 1000 } }, true],
    [
      "the database restarted less than a lease ago (every lock was freed at once)",
      { freeForMs: 3000, view: { dbUpMs: 4999 } },
      false,
    ],
    ["the database has been up a lease", { freeForMs: 3000, view: { dbUpMs: 5000 } }, true],
  ];
  for (const [what, c, expected] of cases)
    assert.equal(ownerGone(c.owner ?? "node-b", "me", c.freeForMs, { ...pg, ...c.view }), expected, what);
});

test("takeover decision: a process claims new work on PostgreSQL only while it holds its own presence lock", () => {
  const cases: Array<[string, Pick<PresenceView, "supported" | "selfHeldForMs">, boolean]> = [
    ["SQLite", { supported: false, selfHeldForMs: null }, true],
    ["PostgreSQL, held", { supported: true, selfHeldForMs: 0 }, true],
    ["PostgreSQL, lost (the others may be taking its work over)", { supported: true, selfHeldForMs: null }, false],
  ];
  for (const [what, view, expected] of cases) assert.equal(mayClaim(view), expected, what);
});

test("presence readings over time: a lock counts as free from the first reading it is free after being seen held; an owner never seen holding one (an earlier version) is left to its lease", () => {
  const m: FreeLocks = { freeSince: new Map(), seenHeld: new Set() };
  // [time, owners of live leases, whose lock is held, expected free-for per counted owner]
  const steps: Array<[number, string[], string[], Record<string, number>]> = [
    [0, ["a", "old"], ["a"], {}],
    [1000, ["a", "old"], [], { a: 0 }],
    [1500, ["a", "old"], [], { a: 500 }],
    [2200, ["a", "old"], ["a"], {}],
    [3000, ["a", "old"], [], { a: 0 }],
    [4000, ["old"], [], {}],
    [5000, ["a"], [], { a: 0 }],
    [9000, ["old"], ["old"], {}],
    [9500, ["old"], [], { old: 0 }],
  ];
  for (const [now, owners, held, expected] of steps)
    assert.deepEqual(Object.fromEntries(readFreeLocks(m, owners, new Set(held), now)), expected, `at ${now} ms`);
});
