import assert from "node:assert/strict";
import { test, type TestContext } from "node:test";
import { RunEventBus } from "../../src/cluster/index.ts";
import { createLogger } from "../../src/log/logger.ts";
import {
  clusterAvailable,
  createStepsRun,
  followRun,
  lagProbe,
  startCluster,
  waitForStatus,
  type Cluster,
  type Replica,
  type SseEvent,
} from "./cluster.ts";

const LEASE_MS = 4000;
/** How often a replica looks for expired leases (run-engine.ts: at most every 500 ms on replicas). */
const SWEEP_MS = 500;
/** Leases are renewed every third of their length. */
const RENEW_MS = LEASE_MS / 3;

interface Seen {
  ids: number[];
  events: Array<SseEvent & { at: number }>;
}

/** Follows a run on `via` (a replica that does not execute it) into `seen`; reconnects once with Last-Event-ID if the stream breaks. */
async function follow(
  via: Replica,
  threadId: string,
  runId: string,
  seen: Seen,
  onEvent: (e: SseEvent) => void = () => {},
): Promise<void> {
  let last = "-1";
  const push = (e: SseEvent) => {
    seen.events.push({ ...e, at: performance.now() });
    if (e.id !== undefined) {
      seen.ids.push(Number(e.id));
      last = e.id;
    }
    onEvent(e);
  };
  await followRun(via.url, threadId, runId, last, push);
}

const attemptOf = (e: SseEvent) =>
  e.event === "metadata" ? (JSON.parse(e.data) as { attempt: number }).attempt : null;
const contiguous = (ids: number[]) => ids.every((id, i) => id === i);

async function doneSteps(cluster: Cluster, threadId: string): Promise<number[]> {
  const state = (await (await fetch(`${cluster.lb.url}/threads/${threadId}/state`)).json()) as {
    values: { done: number[] };
  };
  return state.values.done;
}

/** A run of the cluster, the replica executing it and another replica following it. */
async function startRun(cluster: Cluster, steps: number, delay: number) {
  const { threadId, runId } = await createStepsRun(cluster.lb.url, { steps, delay });
  await waitForStatus(cluster.lb.url, threadId, runId, ["running"], 10_000);
  const exec = await cluster.executing(runId);
  assert.ok(exec, "executing replica found");
  const via = cluster.replicas.find((r) => r !== exec && r.child)!;
  return { threadId, runId, exec, via };
}

test("replica failures (one cluster of 3, lease 4 s)", async (top) => {
  if (!(await clusterAvailable(top))) return;
  // Info: a failing test prints each replica's log, with the runs that ended with an error.
  const cluster = await startCluster(top, 3, { WHARF_RUN_LEASE_MS: String(LEASE_MS), WHARF_LOG_LEVEL: "info" });
  await top.test(
    "SIGTERM: the run is drained at a superstep and resumed elsewhere without waiting for the lease",
    (t) => sigterm(t, cluster),
  );
  await top.test(
    "redis restarted mid-stream: the stream resumes or ends with a clean error; the run is not lost",
    (t) => redisRestart(t, cluster),
  );
  await top.test(
    "a frozen replica (SIGSTOP) loses its run to another after the lease; thawed, its late writes are refused",
    (t) => zombie(t, cluster),
  );
  await top.test(
    "kill -9 the executing replica: another takes the run over from its checkpoint within lease + 1 s",
    (t) => killExecuting(t, cluster),
  );
});

async function sigterm(t: TestContext, cluster: Cluster): Promise<void> {
  const { threadId, runId, exec, via } = await startRun(cluster, 12, 200);
  const seen: Seen = { ids: [], events: [] };
  let termAt = 0;
  const following = follow(via, threadId, runId, seen, (e) => {
    if (e.event === "values" && !termAt && seen.events.filter((x) => x.event === "values").length === 3) {
      termAt = performance.now();
      void exec.signal("SIGTERM");
    }
  });
  await following;
  const second = seen.events.find((e) => attemptOf(e) === 2);
  assert.ok(second, `attempt 2 streamed: ${seen.events.map((e) => e.event).join(",")}`);
  const resumeMs = second.at - termAt;
  t.diagnostic(`SIGTERM → attempt 2's first event: ${resumeMs.toFixed(0)} ms (lease ${LEASE_MS} ms)`);
  assert.ok(resumeMs < LEASE_MS, "handed back at once, not at lease expiry");
  assert.ok(contiguous(seen.ids), seen.ids.join(","));
  assert.deepEqual(
    await doneSteps(cluster, threadId),
    Array.from({ length: 12 }, (_, i) => i + 1),
  );
  assert.match(exec.output(), /|/); // the replica exited on its own
  await exec.start(); // back for the next tests
}

async function redisRestart(t: TestContext, cluster: Cluster): Promise<void> {
  const { threadId, runId, via } = await startRun(cluster, 10, 250);
  const seen: Seen = { ids: [], events: [] };
  let restarted = false;
  await follow(via, threadId, runId, seen, (e) => {
    if (e.event === "values" && !restarted && seen.events.filter((x) => x.event === "values").length === 3) {
      restarted = true;
      void cluster.redis
        .stop()
        .then(() => new Promise((r) => setTimeout(r, 500)))
        .then(() => cluster.redis.start());
    }
  });
  assert.ok(restarted);
  const errors = seen.events.filter((e) => e.event === "error");
  if (errors.length) {
    // A clean error: the last event, naming the stream, not the run.
    assert.equal(seen.events.at(-1)!.event, "error");
    assert.match(errors[0].data, /StreamUnavailable/);
  } else assert.equal(seen.events.filter((e) => e.event === "values").length, 11);
  t.diagnostic(
    `redis restart mid-stream: ${errors.length ? "clean error" : "stream resumed"} after ${seen.ids.length} events`,
  );
  assert.ok(contiguous(seen.ids.filter((_, i) => seen.events[i]?.event !== "error")));
  assert.equal(await waitForStatus(cluster.lb.url, threadId, runId, ["success"], 20_000), "success");
  assert.deepEqual(
    await doneSteps(cluster, threadId),
    Array.from({ length: 10 }, (_, i) => i + 1),
  );
}

async function zombie(t: TestContext, cluster: Cluster): Promise<void> {
  const { threadId, runId, exec, via } = await startRun(cluster, 12, 200);
  const seen: Seen = { ids: [], events: [] };
  const pid = exec.nodePid();
  const lag = lagProbe();
  t.after(() => lag.stop());
  let stoppedAt = 0;
  let thawing = false;
  try {
    await follow(via, threadId, runId, seen, (e) => {
      if (e.event === "values" && !stoppedAt && seen.events.filter((x) => x.event === "values").length === 3) {
        stoppedAt = performance.now();
        process.kill(pid, "SIGSTOP");
      }
      if (attemptOf(e) === 2 && !thawing) {
        thawing = true;
        setTimeout(() => process.kill(pid, "SIGCONT"), 300);
      }
    });
    const second = seen.events.find((e) => attemptOf(e) === 2);
    assert.ok(second, "taken over");
    assert.ok(contiguous(seen.ids), seen.ids.join(","));
    // After attempt 2 began, values continue from the checkpoint it resumed (one repeat when that is
    // the run's first, with the input still to apply): nothing of the zombie's interleaved.
    const lengths = seen.events
      .filter((e) => e.event === "values")
      .map((e) => (JSON.parse(e.data) as { done: number[] }).done.length);
    const from = seen.events.indexOf(second);
    const after = seen.events
      .slice(from)
      .filter((e) => e.event === "values")
      .map((e) => (JSON.parse(e.data) as { done: number[] }).done.length);
    assert.ok(
      after.slice(1).every((n, i) => n === after[i] + 1 || (i === 0 && n === after[0] && n === 0)),
      `values after the takeover: ${lengths.join(",")}`,
    );
    // The stream ends once the run's end is recorded: its status is final by now (a lease to read it).
    assert.equal(await waitForStatus(cluster.lb.url, threadId, runId, ["success"], LEASE_MS), "success");
    const takeover = second.at - stoppedAt;
    t.diagnostic(
      `SIGSTOP → attempt 2's first event: ${takeover.toFixed(0)} ms, → success: ${(performance.now() - stoppedAt).toFixed(0)} ms (lease ${LEASE_MS} ms, timers up to ${lag.maxMs()} ms late)`,
    );
    // Not before the lease could run out (the freeze came at most a renewal after the last one);
    // at the latest a sweep after it ran out, plus one retry of a takeover that found the row still
    // locked by the frozen replica (it waits half a renewal, then the next sweep), plus the load.
    assert.ok(takeover >= LEASE_MS - RENEW_MS, `takeover ${takeover.toFixed(0)} ms: before the lease ran out`);
    assert.ok(takeover <= LEASE_MS + SWEEP_MS + RENEW_MS + lag.maxMs(), `takeover ${takeover.toFixed(0)} ms`);
    await new Promise((r) => setTimeout(r, 1000)); // the thawed replica's next step comes and is refused
    assert.deepEqual(
      await doneSteps(cluster, threadId),
      Array.from({ length: 12 }, (_, i) => i + 1),
    );
    // A late append of attempt 1, as a zombie would send it, is refused by the fence.
    const bus = await RunEventBus.open(cluster.redis.url, createLogger({ level: "silent" }));
    t.after(() => bus.close());
    const fenced = await new Promise<boolean>((resolve) => {
      const w = bus.writer(runId, 1, { base: 0, events: [{ event: "values", json: "{}" }] }, () => resolve(true));
      w.notify();
      setTimeout(() => resolve(false), 3000).unref();
    });
    assert.ok(fenced, "attempt 1's append refused");
  } catch (err) {
    if (!thawing) process.kill(pid, "SIGCONT");
    for (const r of cluster.replicas)
      console.error(
        `--- ${r.name}${r === exec ? " (frozen)" : ""}${r === via ? " (followed through)" : ""}\n${r.output()}`,
      );
    console.error(
      seen.events
        .map((e) => `${(e.at - stoppedAt).toFixed(0)} ms: ${e.id} ${e.event} ${e.data.replace(/\s+/g, "")}`)
        .join("\n"),
    );
    throw err;
  }
}

async function killExecuting(t: TestContext, cluster: Cluster): Promise<void> {
  const { threadId, runId, exec, via } = await startRun(cluster, 14, 200);
  const seen: Seen = { ids: [], events: [] };
  let killedAt = 0;
  await follow(via, threadId, runId, seen, (e) => {
    if (e.event === "values" && !killedAt && seen.events.filter((x) => x.event === "values").length === 4) {
      killedAt = performance.now();
      void exec.signal("SIGKILL");
    }
  });
  const second = seen.events.find((e) => attemptOf(e) === 2);
  assert.ok(second, "the stream continues with attempt 2");
  const takeover = second.at - killedAt;
  t.diagnostic(`takeover (kill -9 → attempt 2's first event): ${takeover.toFixed(0)} ms (lease ${LEASE_MS} ms)`);
  assert.ok(takeover <= LEASE_MS + 1000, `takeover ${takeover} ms`);
  assert.ok(contiguous(seen.ids), seen.ids.join(","));
  assert.equal(await waitForStatus(cluster.lb.url, threadId, runId, ["success"], 10_000), "success");
  assert.deepEqual(
    await doneSteps(cluster, threadId),
    Array.from({ length: 14 }, (_, i) => i + 1),
  );
}
