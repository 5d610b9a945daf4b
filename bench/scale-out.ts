// Replicas behind HAProxy on one PostgreSQL and one Redis (test/scale's harness: real processes,
// each replica in its own PID namespace; needs root, PostgreSQL, redis-server and haproxy):
//   - cross-replica event latency: a run followed at once on the replica executing it (memory,
//     the fast path) and on another (Redis); the lag of each event, p50/p99;
//   - the fast path's cost: pushing events into a run's channel with and without the Redis mirror;
//   - reconnect gap: kill -9 of the replica serving a stream → next event through the balancer;
//   - takeover: kill -9 of the executing replica → the next attempt's first event;
//   - throughput 1 → 2 → 3 replicas on an I/O-bound graph (each run one 500 ms step, like a model
//     call), WHARF_RUN_SLOTS=4: slot-bound scaling, as ratios against one replica in the same run.
//   node bin/run-ts.js bench/scale-out.ts [--quick]
// Run start on another replica (the NOTIFY wake-up against the poll): bench/scale-wakeups.ts.
import { RunChannel } from "../src/agent-server/runs/run-channel.ts";
import { RunEventBus } from "../src/cluster/index.ts";
import { createLogger } from "../src/log/logger.ts";
import {
  createStepsRun,
  followRun,
  readSse,
  startCluster,
  waitForStatus,
  type SseEvent,
} from "../test/scale/cluster.ts";

const quick = process.argv.includes("--quick");
const LEASE_MS = 2000;
const cleanups: Array<() => unknown> = [];
const t = { after: (fn: () => unknown) => void cleanups.push(fn) };
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const cluster = await startCluster(
    t,
    3,
    { WHARF_RUN_LEASE_MS: String(LEASE_MS), WHARF_RUN_SLOTS: "4" },
    { start: 1 },
  );
  const [r0, r1, r2] = cluster.replicas;

  // Throughput first, while replicas join one by one.
  const perStep = quick ? 24 : 48;
  const throughput: number[] = [];
  for (const n of [1, 2, 3]) {
    if (n === 2) await r1.start();
    if (n === 3) await r2.start();
    await sleep(1500); // health checks mark the new replica up
    const started = performance.now();
    const runs = await Promise.all(
      Array.from({ length: perStep }, () => createStepsRun(cluster.lb.url, { steps: 1, delay: 500 })),
    );
    await Promise.all(runs.map((r) => waitForStatus(cluster.lb.url, r.threadId, r.runId, ["success"], 120_000)));
    throughput.push(perStep / ((performance.now() - started) / 1000));
  }

  // Cross-replica latency: the same run on its executing replica and on another.
  const lags: number[] = [];
  for (let i = 0; i < (quick ? 2 : 5); i++) {
    const { threadId, runId } = await createStepsRun(cluster.lb.url, { steps: 20, delay: 30 });
    await waitForStatus(cluster.lb.url, threadId, runId, ["running", "success"], 10_000);
    const exec = (await cluster.executing(runId)) ?? r0;
    const other = cluster.replicas.find((r) => r !== exec)!;
    const local: number[] = [];
    const remote: number[] = [];
    await Promise.all([
      followRun(exec.url, threadId, runId, "-1", () => local.push(performance.now())),
      followRun(other.url, threadId, runId, "-1", () => remote.push(performance.now())),
    ]);
    // Live events only (the first ones may be replayed backlog for one of them).
    for (let k = 3; k < Math.min(local.length, remote.length); k++) lags.push(remote[k] - local[k]);
  }

  // The fast path's cost: events pushed into a channel followed locally, with and without the mirror.
  const bus = await RunEventBus.open(cluster.redis.url, createLogger({ level: "silent" }));
  const pushCost = async (mirror: boolean) => {
    const channel = new RunChannel();
    const follower = (async () => {
      for await (const _ of channel.follow(-1)) void _;
    })();
    if (mirror) {
      const w = bus.writer(`bench-${Math.random()}`, 1, channel, () => {});
      channel.onPush = () => w.notify();
    }
    const n = quick ? 5_000 : 20_000;
    const started = performance.now();
    for (let i = 0; i < n; i++) {
      channel.push("messages", [{ type: "AIMessageChunk", content: `token ${i}` }, { langgraph_node: "model" }]);
      if (i % 50 === 0) await new Promise((r) => setImmediate(r)); // tokens arrive over time
    }
    const us = ((performance.now() - started) * 1000) / n;
    channel.close();
    await follower;
    return us;
  };
  await pushCost(false);
  const plain = await pushCost(false);
  const mirrored = await pushCost(true);
  await bus.close();

  // Reconnect gap: the replica serving a stream dies; the client comes back through the balancer.
  const gaps: number[] = [];
  {
    const { threadId, runId } = await createStepsRun(cluster.lb.url, { steps: 30, delay: 100 });
    await waitForStatus(cluster.lb.url, threadId, runId, ["running"], 10_000);
    const exec = await cluster.executing(runId);
    let res: Response | null = null;
    for (let i = 0; i < 10 && !res; i++) {
      const r = await fetch(`${cluster.lb.url}/threads/${threadId}/runs/${runId}/stream`, {
        headers: { "last-event-id": "-1" },
      });
      if (r.headers.get("x-served-by") !== exec?.name) res = r;
    }
    const serving = cluster.replicas.find((r) => r.name === res!.headers.get("x-served-by"))!;
    let last = "-1";
    let count = 0;
    let killedAt = 0;
    await readSse(res!, (e: SseEvent) => {
      if (e.id) last = e.id;
      if (++count === 5 && !killedAt) {
        killedAt = performance.now();
        void serving.signal("SIGKILL");
      }
    }).catch(() => {});
    const again = await fetch(`${cluster.lb.url}/threads/${threadId}/runs/${runId}/stream`, {
      headers: { "last-event-id": last },
    });
    let first = 0;
    await readSse(again, () => (first ||= performance.now()));
    gaps.push(first - killedAt);
    await serving.start();
  }

  // Takeover: the executing replica dies; another resumes the run from its checkpoint.
  let takeover = 0;
  {
    const { threadId, runId } = await createStepsRun(cluster.lb.url, { steps: 20, delay: 150 });
    await waitForStatus(cluster.lb.url, threadId, runId, ["running"], 10_000);
    const exec = (await cluster.executing(runId))!;
    const via = cluster.replicas.find((r) => r !== exec && r.child)!;
    let killedAt = 0;
    let values = 0;
    await followRun(via.url, threadId, runId, "-1", (e) => {
      if (e.event === "values" && ++values === 3) {
        killedAt = performance.now();
        void exec.signal("SIGKILL");
      }
      if (e.event === "metadata" && killedAt && !takeover) takeover = performance.now() - killedAt;
    });
  }

  const f = (x: number) => x.toFixed(1);
  console.log(
    `scale-out (3 replicas behind HAProxy, lease ${LEASE_MS} ms, WHARF_RUN_SLOTS=4${quick ? ", quick" : ""})`,
  );
  console.log(
    `  cross-replica event lag vs the executing replica's own clients: p50 ${f(pct(lags, 50))} ms, p99 ${f(pct(lags, 99))} ms (${lags.length} events)`,
  );
  console.log(
    `  fast path: push+local delivery ${f(plain)} µs/event without the Redis mirror, ${f(mirrored)} µs/event with it (×${(mirrored / plain).toFixed(2)})`,
  );
  console.log(
    `  reconnect gap (kill -9 of the serving replica → next event via the balancer): ${gaps.map((g) => g.toFixed(0)).join(", ")} ms`,
  );
  console.log(
    `  takeover (kill -9 of the executing replica → next attempt's first event): ${takeover.toFixed(0)} ms (lease ${LEASE_MS} ms)`,
  );
  console.log(
    `  throughput, ${perStep} runs of one 500 ms step: ${throughput.map((x) => x.toFixed(2)).join(" → ")} runs/s for 1 → 2 → 3 replicas (×${(throughput[1] / throughput[0]).toFixed(2)}, ×${(throughput[2] / throughput[0]).toFixed(2)}; slot bound 8 runs/s per replica)`,
  );
}

try {
  await main();
} catch (err) {
  console.error(err);
  process.exitCode = 1;
} finally {
  for (const c of cleanups.reverse()) await Promise.resolve(c()).catch(() => {});
}
process.exit();
