// Where a Python run's time goes across the two processes: the agent server's side of the bridge
// (PythonWorker) and the worker, stage by stage on one clock (CLOCK_MONOTONIC in both), for the
// benchmark's echo graph run stateless as /runs/wait runs it, one run after an idle gap (as served
// runs come). Per stage: its p50 offset from the request's write, and the step from the stage
// before. Beside it, per run: the voluntary context switches (each one a sleep, so a wake-up) and
// the CPU time of each process.
//   node bin/run-ts.js bench/python-run-timeline.ts [--runs N] [--gap MS] [--python PATH]
// The interpreter is the environment bench/python-graphs.ts made for its echo project (run that
// first), or --python. The worker is traced by python-run-timeline/sitecustomize.py.
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { PythonWorker } from "../src/agent-server/python/worker.ts";
import { createLogger } from "../src/log/logger.ts";
import { echoRunOnWorker } from "./python-echo-run.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
const arg = (name: string) => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const N = Number(arg("--runs") ?? 300);
const GAP = Number(arg("--gap") ?? 5);
const WARM = 20;
const envs = process.env.WHARF_PYTHON_ENVS || "/tmp/wharf-test-python-envs";
const echoDir = path.join(os.tmpdir(), "wharf-bench-python", "echo");

function benchPython(): string {
  const given = arg("--python");
  if (given) return given;
  for (const d of fs.existsSync(envs) ? fs.readdirSync(envs) : []) {
    const lib = path.join(envs, d, "lib");
    for (const v of fs.existsSync(lib) ? fs.readdirSync(lib) : []) {
      const pth = path.join(lib, v, "site-packages", "wharf-project.pth");
      if (fs.existsSync(pth) && fs.readFileSync(pth, "utf8").split("\n").includes(echoDir))
        return path.join(envs, d, "bin/python");
    }
  }
  throw new Error("no environment for the echo project: run bench/python-graphs.ts first, or pass --python");
}

/** Voluntary context switches (all threads) and CPU ms of a process. */
function procStats(pid: number | "self"): { sleeps: number; cpuMs: number } {
  let sleeps = 0;
  for (const t of fs.readdirSync(`/proc/${pid}/task`)) {
    const status = fs.readFileSync(`/proc/${pid}/task/${t}/status`, "utf8");
    sleeps += Number(/\nvoluntary_ctxt_switches:\s+(\d+)/.exec(status)![1]);
  }
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return { sleeps, cpuMs: (Number(f[11]) + Number(f[12])) * 10 };
}

type Stamp = [string, number];

/** Per stage (numbered by occurrence within a run), the p50 offset in µs from the run's first stamp. */
function timeline(runs: Stamp[][]): Array<{ stage: string; p50: number; seen: number }> {
  const offsets = new Map<string, number[]>();
  for (const run of runs) {
    const t0 = run[0][1];
    const count = new Map<string, number>();
    for (const [label, t] of run) {
      const n = (count.get(label) ?? 0) + 1;
      count.set(label, n);
      const key = n > 1 ? `${label} (${n})` : label;
      offsets.set(key, [...(offsets.get(key) ?? []), (t - t0) / 1000]);
    }
  }
  const p50 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  return [...offsets.entries()]
    .map(([stage, xs]) => ({ stage, p50: p50(xs), seen: xs.length }))
    .sort((a, b) => a.p50 - b.p50);
}

const worker = new PythonWorker({
  python: benchPython(),
  projectDir: echoDir,
  graphs: { echo: path.join(here, "python-run-timeline/echo_traced.py") + ":graph" },
  auth: null,
  checkpointer: { kind: "sqlite", path: path.join(os.tmpdir(), "wharf-bench-python", "timeline.sqlite") },
  log: createLogger({ level: "silent" }),
});
// Read by the worker's environment (the server passes its own on).
process.env.WHARF_TRACE = "1";
process.env.PYTHONPATH = [path.join(here, "python-run-timeline"), process.env.PYTHONPATH].filter(Boolean).join(":");
await worker.start();
const stamps: Stamp[] = [];
const now = () => Number(process.hrtime.bigint());
// The server's side, from outside the class: its process is what the stamps on this side time.
const internals = worker as unknown as {
  child: { stdio: Array<NodeJS.ReadableStream | null> };
  input: { write(b: Buffer): boolean };
};
internals.child.stdio[4]!.prependListener("data", () => stamps.push(["ts: frame read", now()]));
const write = internals.input.write.bind(internals.input);
internals.input.write = (b: Buffer) => {
  stamps.push(["ts: request written", now()]);
  return write(b);
};

const input = { messages: [{ role: "human", content: "hi" }] };
const runs: Stamp[][] = [];
let before = { py: procStats(worker.pid!), ts: procStats("self") };
for (let i = 0; i < N + WARM; i++) {
  if (i === WARM) before = { py: procStats(worker.pid!), ts: procStats("self") };
  await new Promise((r) => setTimeout(r, GAP));
  const from = stamps.length;
  await echoRunOnWorker(worker, i, input);
  stamps.push(["ts: result handed to the run", now()]);
  if (i >= WARM) runs.push(stamps.slice(from));
}
const after = { py: procStats(worker.pid!), ts: procStats("self") };
const py = await worker.call<Stamp[]>("trace.dump", {});
await worker.stop();

// Each run's worker stamps are those between its request and its result.
const merged = runs.map((run) => {
  const [t0, t1] = [run[0][1], run[run.length - 1][1]];
  return [...run, ...py.filter(([, t]) => t >= t0 && t <= t1)].sort((a, b) => a[1] - b[1]);
});
console.log(
  `Python echo run over the bridge, stateless, ${N} runs ${GAP} ms apart: stage p50 (µs from the request's write)`,
);
let last = 0;
for (const { stage, p50, seen } of timeline(merged)) {
  const share = seen === N ? "" : ` (in ${seen} of ${N} runs)`;
  console.log(`  ${stage.padEnd(40)} ${p50.toFixed(0).padStart(6)}  +${(p50 - last).toFixed(0).padStart(5)}${share}`);
  last = p50;
}
const per = (a: number, b: number) => ((a - b) / N).toFixed(2);
console.log(
  `  per run: worker ${per(after.py.sleeps, before.py.sleeps)} sleeps, ${per(after.py.cpuMs, before.py.cpuMs)} ms CPU; ` +
    `this process ${per(after.ts.sleeps, before.ts.sleeps)} sleeps (one is the gap's timer), ${per(after.ts.cpuMs, before.ts.cpuMs)} ms CPU`,
);
