// Run-start latency across replicas: a run created on a replica with no free slot waits `pending`
// until a replica with one claims it. Two replicas (one slot each) on one PostgreSQL and one Redis
// (test/scale's harness; needs root, PostgreSQL, redis-server and haproxy): r0's slot is held by a
// long run, so every run created on r0 is started by r1. Measured: the creating request's answer
// → the run's first event (its `metadata`, streamed from r0 through Redis), one run at a time,
// against the same run created on r1 (started where it was created) in the same run.
//   node bin/run-ts.js bench/scale-wakeups.ts [--quick]
import { createStepsRun, followRun, startCluster } from "../test/scale/cluster.ts";

const quick = process.argv.includes("--quick");
const cleanups: Array<() => unknown> = [];
const t = { after: (fn: () => unknown) => void cleanups.push(fn) };
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  const cluster = await startCluster(t, 2, { WHARF_RUN_SLOTS: "1" });
  const [r0] = cluster.replicas;
  const holder = await createStepsRun(r0.url, { steps: 1, delay: 600_000 });
  if ((await cluster.executing(holder.runId)) !== r0) throw new Error("the slot holder does not run on r0");

  const n = quick ? 20 : 60;
  // The baseline, interleaved with the measured runs: the same run created on r1, whose slot is free,
  // so it starts where it was created with no wake-up across replicas.
  const across: number[] = [];
  const local: number[] = [];
  for (let i = 0; i < n; i++) {
    across.push(await startLatency(r0.url));
    await sleep(37); // not in step with the 500 ms poll
    local.push(await startLatency(cluster.replicas[1].url));
    await sleep(37);
  }
  const f = (x: number) => x.toFixed(1);
  const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
  console.log(
    `run start on another replica (r0 full, r1 free; ${n} runs one at a time): p50 ${f(pct(across, 50))} ms, p99 ${f(pct(across, 99))} ms, mean ${f(mean(across))} ms`,
  );
  console.log(
    `baseline, the run started where it was created (r1): p50 ${f(pct(local, 50))} ms, p99 ${f(pct(local, 99))} ms, mean ${f(mean(local))} ms; across / local p50 ${(pct(across, 50) / pct(local, 50)).toFixed(2)}x`,
  );
}

/** The creating request's answer → the run's first event, followed on the replica it was created on. */
async function startLatency(url: string): Promise<number> {
  const { threadId, runId } = await createStepsRun(url, { steps: 1, delay: 5 });
  const answered = performance.now();
  let first = 0;
  await followRun(url, threadId, runId, "-1", () => {
    first ||= performance.now();
  });
  return first - answered;
}

main()
  .catch((err) => {
    console.error(err);
    process.exitCode = 1;
  })
  .finally(async () => {
    for (const fn of cleanups.reverse()) await fn();
  });
