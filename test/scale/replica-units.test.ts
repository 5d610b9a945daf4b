import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import {
  compareIds,
  eventNumber,
  isAnotherReplicas,
  nextStep,
  parseRunEntry,
  parseThreadEventEntry,
  streamId,
} from "../../src/cluster/index.ts";
import { ThreadLog } from "../../src/agent-server/protocol/thread-log.ts";
import { filterOfId, subscriptionId } from "../../src/agent-server/protocol/subscription-ids.ts";
import { parseSignal } from "../../src/agent-server/runs/run-signals.ts";
import { leftBehind } from "../../src/sandboxes/lifecycle/left-behind.ts";
import { replicaRefusal } from "../../src/config/index.ts";
import { clockOffset, databaseTime } from "../../src/agent-server/runs/db-clock.ts";
import { planRecovery } from "../../src/agent-server/runs/run-recovery.ts";
import { wharfCli } from "../support/process.ts";

test("stream ids: event n is 0-<n+1>, and back", () => {
  for (const [n, id] of [
    [0, "0-1"],
    [41, "0-42"],
    [19_999, "0-20000"],
  ] as const) {
    assert.equal(streamId(n), id);
    assert.equal(eventNumber(id), n);
  }
  assert.equal(eventNumber("1700000000000-0"), null); // an auto id (thread index), not a run event
});

test("a sandbox's control-plane call goes to its owner only when that is another replica and the call was not forwarded already", () => {
  const table: Array<[string | null, boolean, boolean]> = [
    [null, false, false], // one process, or never provisioned
    ["node-a", false, false], // this replica runs it
    ["node-b", false, true],
    ["node-b", true, false], // came through the internal listener: acted on here, never sent on
  ];
  for (const [owner, forwarded, want] of table)
    assert.equal(isAnotherReplicas(owner, "node-a", forwarded), want, `${owner} ${forwarded}`);
});

test("stream ids order numerically, not as text", () => {
  const table: Array<[string, string, number]> = [
    ["0-2", "0-10", -1],
    ["0-10", "0-2", 1],
    ["1-0", "0-99", 1],
    ["5-5", "5-5", 0],
  ];
  for (const [a, b, want] of table) assert.equal(compareIds(a, b), want, `${a} vs ${b}`);
});

test("a follower delivers the next event, skips what it saw, and stops at a hole", () => {
  const ev = (n: number) => ({ kind: "event" as const, n, event: "values", json: "{}" });
  const table: Array<[number, number, string]> = [
    [-1, 0, "deliver"],
    [4, 5, "deliver"],
    [4, 4, "skip"],
    [4, 2, "skip"],
    [4, 7, "gap"],
    [-1, 3, "gap"],
  ];
  for (const [after, n, want] of table) assert.equal(nextStep(after, ev(n)), want, `after ${after}, entry ${n}`);
});

test("run stream entries: events and the end marker; anything else is ignored", () => {
  assert.deepEqual(parseRunEntry(["0-3", ["e", "values", "d", '{"a":1}']]), {
    kind: "event",
    n: 2,
    event: "values",
    json: '{"a":1}',
  });
  assert.deepEqual(parseRunEntry(["0-9", ["end", "end"]]), { kind: "end", n: 8, status: "end" });
  assert.equal(parseRunEntry(["0-3", ["x", "y"]]), null);
  assert.equal(parseRunEntry(["17-3", ["e", "values", "d", "{}"]]), null);
});

test("REDIS_URL is refused without PostgreSQL, with one line", () => {
  const table: Array<[string | undefined, string | undefined, boolean]> = [
    [undefined, undefined, false],
    ["postgres://db/x", undefined, false],
    ["postgres://db/x", "redis://r:6379", false],
    ["postgresql://db/x", "redis://r:6379", false],
    [undefined, "redis://r:6379", true],
    ["sqlite:/tmp/w.db", "redis://r:6379", true],
  ];
  for (const [db, redis, refused] of table) {
    const r = replicaRefusal(db, redis);
    assert.equal(r !== null, refused, `${db} + ${redis}`);
    if (r) assert.ok(!r.includes("\n") && r.startsWith("REDIS_URL needs"));
  }
});

test("leases on the database's clock: the offset is taken at the middle of the round trip", () => {
  // This machine 5 s behind the database, a 20 ms round trip.
  assert.equal(clockOffset(1_000, 1_020, 6_010), 5_000);
  assert.equal(clockOffset(1_000, 1_000, 1_000), 0);
  // A lease of 10 s taken at local 0 with the database 5 s ahead ends at database time 15 s.
  assert.equal(databaseTime(0, 5_000, 10_000), new Date(15_000).toISOString());
  assert.equal(databaseTime(20_000, -5_000), new Date(15_000).toISOString());
});

test("drained attempts do not count against the crash limit", () => {
  const base = {
    input: { x: 1 },
    command: null,
    config: {},
    stream_mode: ["values"],
    temporary: false,
    subgraphs: false,
    resumable: false,
    on_disconnect: "continue" as const,
    sealed_private: { keyId: "k", blob: "b" },
  };
  const table: Array<[number, number, string]> = [
    [1, 0, "resume"],
    [2, 0, "error"], // one crash already resumed
    [2, 1, "resume"], // attempt 1 was drained, attempt 2 crashed
    [4, 3, "resume"],
    [4, 2, "error"],
  ];
  for (const [attempt, handbacks, want] of table)
    assert.equal(
      planRecovery({ ...base, attempt, handbacks }, { temporary: false, headRunId: "r", runId: "r" }).action,
      want,
      `attempt ${attempt}, handbacks ${handbacks}`,
    );
});

test("wharf up: REDIS_URL with SQLite stops start-up with one clear line", async () => {
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-redis-refused-"));
  try {
    const { code, out } = await wharfCli(["up", "--no-supervisor"], {
      env: { WHARF_HOME: home, WHARF_PORT: "0", REDIS_URL: "redis://127.0.0.1:1", DATABASE_URL: "" },
    });
    assert.equal(code, 2, out);
    assert.match(out.trim(), /^wharf: REDIS_URL needs DATABASE_URL to be PostgreSQL[^\n]*$/);
  } finally {
    fs.rmSync(home, { recursive: true, force: true });
  }
});

test("thread protocol entries: seq from the id, the event JSON, its run and assistant", () => {
  assert.deepEqual(
    parseThreadEventEntry(["0-7", ["u", "x.1", "p", '{"method":"values"}', "r", "run-1", "a", "agent"]]),
    { seq: 7, body: '{"method":"values"}', runId: "run-1", assistantId: "agent" },
  );
  assert.equal(parseThreadEventEntry(["0-7", ["u", "x.1"]]), null);
  assert.equal(parseThreadEventEntry(["1700000000000-0", ["p", "{}"]]), null);
});

test("a shared thread log ingests what the store numbered: skips what it has, keeps only what follows a hole, notes where each run begins", () => {
  const log = new ThreadLog();
  const ev = (seq: number, runId: string, event = "running") => ({
    seq,
    runId,
    assistantId: "agent",
    body: JSON.stringify({
      method: "lifecycle",
      params: { namespace: [], timestamp: 1, data: { event, graph_name: "agent" } },
    }),
  });
  log.ingest([ev(1, "r1"), ev(2, "r1", "completed"), ev(2, "r1", "completed")]);
  assert.deepEqual(
    log.events.map((e) => e.seq),
    [1, 2],
  );
  assert.equal(log.assistantId, "agent");
  log.ingest([ev(3, "r2"), ev(4, "r2")]);
  assert.equal(log.runStarts.get("r1"), 0);
  assert.equal(log.runStarts.get("r2"), 2);
  assert.equal(log.currentRunId, "r2");
  assert.equal(log.tree().status, "running");
  log.ingest([ev(9, "r2", "completed")]); // 5…8 lost (Redis restarted, or trimmed)
  assert.deepEqual(
    log.events.map((e) => e.seq),
    [9],
  );
  assert.equal(log.firstKeptSeq, 9);
  assert.equal(log.lastSeq, 9);
  assert.equal(log.events[0].event_id, "9");
});

test("run signals: a cancel, a wake-up for a queued run, or nothing", () => {
  const table: Array<[string, unknown]> = [
    ['{"serverId":"s","runId":"r","action":"interrupt"}', { serverId: "s", runId: "r", action: "interrupt" }],
    ['{"serverId":"s","runId":"r","action":"rollback"}', { serverId: "s", runId: "r", action: "rollback" }],
    ['{"serverId":"s","wake":true}', { serverId: "s", wake: true }],
    ['{"serverId":"s","runId":"r","action":"explode"}', null],
    ['{"serverId":"s","wake":"yes"}', null],
    ['{"runId":"r","action":"interrupt"}', null],
    ["null", null],
    ["{nope", null],
  ];
  for (const [payload, want] of table) assert.deepEqual(parseSignal(payload), want, payload);
});

test("sandbox folders a returning replica removes: rows gone, or owned by another replica now", () => {
  const owners = new Map<string, string | null>([
    ["mine", "node-a"],
    ["moved", "node-b"],
    ["provisioning", null],
  ]);
  assert.deepEqual(leftBehind(["mine", "moved", "provisioning", "deleted"], owners, "node-a"), ["moved", "deleted"]);
  assert.deepEqual(leftBehind([], owners, "node-a"), []);
});

test("a WebSocket subscription's id carries its filter (any replica restores it)", () => {
  const filter = { channels: new Set(["values", "lifecycle"]), namespaces: [["a", "b:1"]], depth: 2 };
  const id = subscriptionId(filter);
  assert.match(id, /^sub-[\w-]{8}\./);
  assert.deepEqual(filterOfId(id), filter);
  assert.notEqual(subscriptionId(filter), id, "unique");
  assert.deepEqual(filterOfId(subscriptionId({ channels: new Set(["values"]) })), { channels: new Set(["values"]) });
  for (const bad of ["sub-1", "sub-999", "sub-abcdefgh.", "sub-abcdefgh.bm90IGpzb24", `sub-abcdefgh.${b64({ c: [] })}`])
    assert.equal(filterOfId(bad), null, bad);
  assert.equal(filterOfId(`sub-abcdefgh.${b64({ c: ["values"], d: -1 })}`), null);
  assert.equal(filterOfId(`sub-abcdefgh.${b64({ c: ["values"], n: "x" })}`), null);
});

const b64 = (v: unknown) => Buffer.from(JSON.stringify(v)).toString("base64url");
