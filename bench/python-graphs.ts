// Python graphs: Wharf's agent server (its Python worker runs the graph) against `langgraph dev`
// (the LangGraph server in memory, PyPI langgraph-cli[inmem] pinned in
// scripts/langgraph-dev-requirements.txt: a test-only reference), on the same one-node echo graph,
// measured in the same run and printed as ratios: stateless /runs/wait p50 and 16-client
// throughput, time to the first `updates` event, the overhead over `graph.ainvoke` in one Python
// process, a Python custom-auth handler's round trip, server start and memory per served project.
// The overhead is what serving adds to the graph's own time (HTTP, run rows and queue, the bridge
// to the worker, the output's JSON): /runs/wait p50 less graph.ainvoke p50 of the same graph, input
// and interpreter, timed in Python one call per wake-up between the sampled requests (as a served
// run comes after an idle gap); the figure over a hot loop of calls is printed beside it.
// /runs/wait is sent by node:http on kept-alive sockets (bench/lean-client.ts), so that the figures
// hold the servers' time rather than the client's; the overhead a `fetch` client sees is printed beside.
// The JavaScript echo graph of the mixed fixture is measured beside them for reference.
// The machine is shared and its load moves within seconds: latencies are sampled interleaved (one
// request to each server in turn), so a ratio compares the same moments; CPU time per run (server
// and worker, from /proc) is printed beside, as it barely depends on the load.
//   node bin/run-ts.js bench/python-graphs.ts [--quick]
// Virtual environments are cached: Wharf's in $WHARF_PYTHON_ENVS (default /tmp/wharf-test-python-envs),
// the reference's by scripts/langgraph-dev-env.sh.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { PythonWorker } from "../src/agent-server/python/worker.ts";
import { createLogger } from "../src/log/logger.ts";
import { timedPost } from "./lean-client.ts";
import { echoRunOnWorker } from "./python-echo-run.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const mixed = path.join(root, "test/agent-server/fixtures/python-mixed");
const quick = process.argv.includes("--quick");
const N = quick ? 100 : 400;
const envs = process.env.WHARF_PYTHON_ENVS || "/tmp/wharf-test-python-envs";

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const median = (xs: number[]) =>
  pct(
    [...xs].sort((a, b) => a - b),
    50,
  );
const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const p = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(p));
    });
  });

// The projects, at fixed paths (Wharf's environment of a local project is cached by its path).
const work = path.join(os.tmpdir(), "wharf-bench-python");
const echoSrc = fs.readFileSync(path.join(mixed, "src/graphs/echo.py"), "utf8");
const AUTH_PY = `from langgraph_sdk import Auth

auth = Auth()


@auth.authenticate
async def authenticate(authorization: str | None):
    if authorization != "Bearer bench":
        raise Auth.exceptions.HTTPException(status_code=401, detail="Invalid token")
    return "bench-user"
`;
function project(name: string, withAuth: boolean): string {
  const dir = path.join(work, name);
  fs.mkdirSync(dir, { recursive: true });
  // Unchanged files keep their times, so the cached environment stays valid.
  const write = (f: string, text: string) => {
    const file = path.join(dir, f);
    if (!fs.existsSync(file) || fs.readFileSync(file, "utf8") !== text) fs.writeFileSync(file, text);
  };
  write("echo.py", echoSrc);
  write("requirements.txt", "langgraph\n");
  if (withAuth) write("auth.py", AUTH_PY);
  write(
    "langgraph.json",
    JSON.stringify(
      {
        dependencies: ["."],
        graphs: { echo: "./echo.py:graph" },
        ...(withAuth ? { auth: { path: "./auth.py:auth" } } : {}),
      },
      null,
      2,
    ),
  );
  return dir;
}

/** The interpreter of Wharf's cached environment for a project folder (its `.pth` names the folder). */
function wharfPython(dir: string): string | null {
  for (const d of fs.existsSync(envs) ? fs.readdirSync(envs) : []) {
    const lib = path.join(envs, d, "lib");
    for (const v of fs.existsSync(lib) ? fs.readdirSync(lib) : []) {
      const pth = path.join(lib, v, "site-packages", "wharf-project.pth");
      if (fs.existsSync(pth) && fs.readFileSync(pth, "utf8").split("\n").includes(dir))
        return path.join(envs, d, "bin/python");
    }
  }
  return null;
}

interface Server {
  name: string;
  url: string;
  child: ChildProcess;
  startMs: number;
  headers: Record<string, string>;
}

async function serve(
  name: string,
  cmd: string,
  args: string[],
  cwd: string,
  env: Record<string, string>,
  port: number,
  headers: Record<string, string> = {},
): Promise<Server> {
  const url = `http://127.0.0.1:${port}`;
  const t0 = performance.now();
  const child = spawn(cmd, args, {
    cwd,
    env: { ...process.env, ...env },
    stdio: ["ignore", "ignore", "pipe"],
    detached: true,
  });
  let err = "";
  child.stderr!.on("data", (c: Buffer) => (err = (err + c.toString()).slice(-4000)));
  for (;;) {
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}:\n${err}`);
    if (
      await fetch(`${url}/ok`).then(
        (r) => r.ok,
        () => false,
      )
    )
      break;
    if (performance.now() - t0 > 600_000) throw new Error(`${name} did not start:\n${err}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  return { name, url, child, startMs: performance.now() - t0, headers };
}

const wharf = async (dir: string, name: string, headers: Record<string, string> = {}) => {
  const port = await freePort();
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-py-"));
  return serve(
    name,
    process.execPath,
    [path.join(root, "bin/wharf.js"), "agent-server", "--project", dir, "--port", String(port), "--open"],
    root,
    { WHARF_HOME: home, WHARF_PYTHON_ENVS: envs, WHARF_LOG_LEVEL: "warn" },
    port,
    headers,
  );
};
const lgPython = execFileSync("bash", [path.join(root, "scripts/langgraph-dev-env.sh")], {
  stdio: ["ignore", "pipe", "inherit"],
})
  .toString()
  .trim();
const langgraphDev = async (dir: string, name: string, headers: Record<string, string> = {}) => {
  const port = await freePort();
  return serve(
    name,
    path.join(path.dirname(lgPython), "langgraph"),
    ["dev", "--no-browser", "--no-reload", "--host", "127.0.0.1", "--port", String(port)],
    dir,
    { LANGSMITH_TRACING: "false", LANGGRAPH_CLI_NO_ANALYTICS: "1" },
    port,
    headers,
  );
};

const input = { messages: [{ role: "human", content: "hi" }] };
/** A stateless /runs/wait from the lean client (the figures hold the server's time, not the client's). */
const wait = (s: Server, graph: string, via: "lean" | "fetch" = "lean") =>
  timedPost(`${s.url}/runs/wait`, JSON.stringify({ assistant_id: graph, input }), {
    expect: "echo: hi",
    via,
    headers: s.headers,
    name: s.name,
  });
/** The same request through `fetch`, for the figure a fetch client sees. */
const waitFetch = (s: Server, graph: string) => wait(s, graph, "fetch");

/** Time until the first `updates` event of a stateless streamed run. */
async function firstUpdate(s: Server, graph: string): Promise<number> {
  const t = performance.now();
  const r = await fetch(`${s.url}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json", ...s.headers },
    body: JSON.stringify({ assistant_id: graph, input, stream_mode: ["updates"] }),
  });
  const reader = r.body!.getReader();
  let seen = "";
  let at = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    seen += Buffer.from(value).toString("utf8");
    if (!at && /event: updates/.test(seen)) at = performance.now() - t;
  }
  if (!at) throw new Error(`${s.name}: no updates event: ${seen.slice(0, 300)}`);
  return at;
}

async function search(s: Server): Promise<number> {
  const t = performance.now();
  const r = await fetch(`${s.url}/assistants/search`, {
    method: "POST",
    headers: { "content-type": "application/json", ...s.headers },
    body: JSON.stringify({ limit: 1 }),
  });
  await r.text();
  if (!r.ok) throw new Error(`${s.name}: assistants/search ${r.status}`);
  return performance.now() - t;
}

async function samples(fn: () => Promise<number>, n: number): Promise<number[]> {
  return (await interleaved([fn], n))[0];
}

/** One sample of each function in turn, n times (after a warm-up): each list sorted. */
async function interleaved(fns: Array<() => Promise<number>>, n: number): Promise<number[][]> {
  for (let i = 0; i < Math.min(30, n); i++) for (const fn of fns) await fn();
  const out = fns.map(() => [] as number[]);
  for (let i = 0; i < n; i++) for (const [k, fn] of fns.entries()) out[k].push(await fn());
  return out.map((xs) => xs.sort((a, b) => a - b));
}

async function throughput(fn: () => Promise<number>, n: number): Promise<number> {
  const t = performance.now();
  let started = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (started < n) {
        started++;
        await fn();
      }
    }),
  );
  return n / ((performance.now() - t) / 1000);
}

/** Throughput of each in alternating rounds (the load moves between rounds too): runs/s of each over all rounds. */
async function throughputs(fns: Array<() => Promise<number>>, n: number, rounds = 4): Promise<number[]> {
  const secs = fns.map(() => 0);
  for (let r = 0; r < rounds; r++) {
    for (const [k, fn] of fns.entries()) secs[k] += n / rounds / (await throughput(fn, n / rounds));
  }
  return secs.map((s) => n / s);
}

/** CPU time (user + system, ms) of a process and its descendants, from /proc. */
function treeCpuMs(pid: number): number {
  const tick = 1000 / Number(execFileSync("getconf", ["CLK_TCK"]).toString().trim() || 100);
  let total = 0;
  for (const p of treePids(pid)) {
    try {
      const stat = fs.readFileSync(`/proc/${p}/stat`, "utf8");
      const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      total += (Number(f[11]) + Number(f[12])) * tick;
    } catch {
      // Gone meanwhile.
    }
  }
  return total;
}

function treePids(pid: number): number[] {
  const rows = execFileSync("ps", ["-e", "-o", "pid=,ppid="])
    .toString()
    .trim()
    .split("\n")
    .map((l) => l.trim().split(/\s+/).map(Number));
  const kids = new Map<number, number[]>();
  for (const [p, pp] of rows) kids.set(pp, [...(kids.get(pp) ?? []), p]);
  const out: number[] = [];
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop()!;
    out.push(p);
    stack.push(...(kids.get(p) ?? []));
  }
  return out;
}

function treeRssMb(pid: number): number {
  // The server and all its descendants (Wharf's worker; langgraph dev's own children).
  const rows = execFileSync("ps", ["-e", "-o", "pid=,ppid=,rss="])
    .toString()
    .trim()
    .split("\n")
    .map((l) => l.trim().split(/\s+/).map(Number));
  const kids = new Map<number, number[]>();
  for (const [p, pp] of rows) kids.set(pp, [...(kids.get(pp) ?? []), p]);
  const rss = new Map(rows.map(([p, , r]) => [p, r]));
  let total = 0;
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop()!;
    total += rss.get(p) ?? 0;
    stack.push(...(kids.get(p) ?? []));
  }
  return total / 1024;
}

/**
 * graph.ainvoke of the echo graph in a Python process of its own, on the worker's event loop (uvloop
 * when the environment has it), one call each time a line arrives: timed inside Python, after an
 * idle gap as a served run is, at the moments the requests are sampled.
 */
function wokenFloor(python: string, dir: string): { once: () => Promise<number>; stop: () => void } {
  const code = `import asyncio, sys, time
sys.path.insert(0, ${JSON.stringify(dir)})
from echo import graph
async def main():
    inp = {"messages": [{"role": "human", "content": "hi"}]}
    for _ in range(50): await graph.ainvoke(inp)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while await reader.readline():
        s = time.perf_counter()
        await graph.ainvoke(inp)
        sys.stdout.write(f"{(time.perf_counter() - s) * 1000}\\n")
        sys.stdout.flush()
try:
    from wharf_worker.__main__ import run
except ImportError:
    run = asyncio.run
run(main())`;
  const child = spawn(python, ["-c", code], {
    env: { ...process.env, PYTHONPATH: path.join(root, "python") },
    stdio: ["pipe", "pipe", "inherit"],
  });
  let rest = "";
  const waiting: Array<(ms: number) => void> = [];
  child.stdout!.on("data", (c: Buffer) => {
    const lines = (rest + c.toString()).split("\n");
    rest = lines.pop()!;
    for (const l of lines) waiting.shift()?.(Number(l));
  });
  return {
    once: () =>
      new Promise<number>((resolve) => {
        waiting.push(resolve);
        child.stdin!.write("\n");
      }),
    stop: () => child.stdin!.end(),
  };
}

const servers: Server[] = [];
const stopAll = async () => {
  for (const s of servers) {
    if (s.child.exitCode !== null) continue;
    const exited = new Promise((r) => s.child.once("exit", r));
    try {
      process.kill(-s.child.pid!, "SIGTERM");
    } catch {
      // Already gone.
    }
    await exited;
  }
};

try {
  const echoDir = project("echo", false);
  const authDir = project("auth", true);
  const auth = { authorization: "Bearer bench" };
  // One at a time: a server's start is measured while nothing else runs.
  const w = await wharf(echoDir, "wharf");
  servers.push(w);
  const lg = await langgraphDev(echoDir, "langgraph dev");
  servers.push(lg);
  const wm = await wharf(mixed, "wharf (mixed, JS echo)");
  servers.push(wm);

  // Printed as measured: a late failure keeps the figures already taken.
  const rows = { push: (r: string) => console.log(r) };
  console.log(`Python echo graph, stateless runs (${N} sequential, half of Wharf's by each client, then 16 clients)`);
  const ratio = (ref: number, ours: number) => `${(ref / ours).toFixed(2)}×`;
  const line = (what: string, ours: string, ref: string, r: string) =>
    rows.push(`  ${what.padEnd(38)} ${ours.padStart(16)} ${ref.padStart(16)} ${r.padStart(10)}`);
  rows.push(`  ${"".padEnd(38)} ${"Wharf".padStart(16)} ${"langgraph dev".padStart(16)} ${"ratio".padStart(10)}`);

  // The floor sampled between the requests (see `wokenFloor`); its process is not in either server's CPU.
  const woken = wokenFloor(wharfPython(echoDir) ?? lgPython, echoDir);
  const cpu0 = [treeCpuMs(w.child.pid!), treeCpuMs(lg.child.pid!)];
  // Each Wharf request follows the reference's (about 1 s): one round by the lean client, the next by
  // fetch, so both are sampled after the same idle gap.
  const wFetch: number[] = [];
  let round = 0;
  const wharfRound = async () => {
    if (round++ % 2 === 0) return wait(w, "echo");
    wFetch.push(await waitFetch(w, "echo"));
    return NaN;
  };
  const [wAll, lgWait, wokenS] = await interleaved([wharfRound, () => wait(lg, "echo"), woken.once], N);
  const wWait = wAll.filter((x) => !Number.isNaN(x)).sort((a, b) => a - b);
  wFetch.splice(0, wFetch.length - (N >> 1)); // the warm-up's
  wFetch.sort((a, b) => a - b);
  const runs = N + Math.min(30, N);
  const cpuPerRun = [treeCpuMs(w.child.pid!) - cpu0[0], treeCpuMs(lg.child.pid!) - cpu0[1]].map((ms) => ms / runs);
  line(
    "stateless /runs/wait p50 (ms)",
    pct(wWait, 50).toFixed(2),
    pct(lgWait, 50).toFixed(2),
    ratio(pct(lgWait, 50), pct(wWait, 50)),
  );
  line(
    "stateless /runs/wait p99 (ms)",
    pct(wWait, 99).toFixed(2),
    pct(lgWait, 99).toFixed(2),
    ratio(pct(lgWait, 99), pct(wWait, 99)),
  );
  line(
    "CPU per run, server + worker (ms)",
    cpuPerRun[0].toFixed(2),
    cpuPerRun[1].toFixed(2),
    ratio(cpuPerRun[1], cpuPerRun[0]),
  );
  const [wRps, lgRps] = await throughputs([() => wait(w, "echo"), () => wait(lg, "echo")], N);
  line("16 clients (runs/s)", wRps.toFixed(0), lgRps.toFixed(0), ratio(wRps, lgRps));
  const [wFirstS, lgFirstS] = await interleaved([() => firstUpdate(w, "echo"), () => firstUpdate(lg, "echo")], N / 2);
  const [wFirst, lgFirst] = [median(wFirstS), median(lgFirstS)];
  line("first updates event p50 (ms)", wFirst.toFixed(2), lgFirst.toFixed(2), ratio(lgFirst, wFirst));
  line("server start, env cached (ms)", w.startMs.toFixed(0), lg.startMs.toFixed(0), ratio(lg.startMs, w.startMs));
  line(
    "memory, server + worker (MB RSS)",
    treeRssMb(w.child.pid!).toFixed(0),
    treeRssMb(lg.child.pid!).toFixed(0),
    ratio(treeRssMb(lg.child.pid!), treeRssMb(w.child.pid!)),
  );

  // The floor: the same graph invoked in one process (wall p50 and CPU per run), with the worker's interpreter.
  const floorOf = (python: string) =>
    execFileSync(
      python,
      [
        "-c",
        `import asyncio, time, statistics, sys
sys.path.insert(0, ${JSON.stringify(echoDir)})
from echo import graph
async def main():
    inp = {"messages": [{"role": "human", "content": "hi"}]}
    for _ in range(50): await graph.ainvoke(inp)
    t = []
    c = time.process_time()
    for _ in range(${N}):
        s = time.perf_counter(); await graph.ainvoke(inp); t.append((time.perf_counter() - s) * 1000)
    w = []
    try:
        from wharf_worker import runs
        req = {"input": inp, "stream_mode": ["values"], "temporary": True}
        for k in range(${N} + 50):
            s = time.perf_counter()
            m = await runs.stream_run(graph, req, {"configurable": {}}, lambda e, b: None)
            await runs.outcome(graph, {"configurable": {}}, m, False)
            w.append((time.perf_counter() - s) * 1000)
    except ImportError:
        w = [float("nan")] * 51
    print(statistics.median(t), (time.process_time() - c) * 1000 / ${N}, statistics.median(w[50:]))
try:
    from wharf_worker.__main__ import run
except ImportError:
    run = asyncio.run
run(main())`,
      ],
      { env: { ...process.env, PYTHONPATH: path.join(root, "python") } },
    )
      .toString()
      .trim()
      .split(" ")
      .map(Number);
  const [floor, floorCpu, workerRun] = floorOf(wharfPython(echoDir) ?? lgPython);
  const wokenFloorP50 = pct(wokenS, 50);
  console.log(
    `  (graph.ainvoke in one Python process on the worker's event loop: p50 ${wokenFloorP50.toFixed(2)} ms one call per wake-up, sampled between the requests above; ${floor.toFixed(2)} ms in a hot loop; ${floorCpu.toFixed(2)} ms CPU per run)`,
  );
  // What a server adds to the graph's own time: HTTP, the run's rows and queue, the bridge, the
  // output's serialisation. Against the same graph, input and interpreter, timed inside Python (no
  // serialisation of its output), each call after an idle gap as a served run is: a call in a hot
  // loop finds its thread pool and CPUs awake (the echo node is sync: it runs in the executor).
  line(
    "overhead over graph.ainvoke p50 (ms)",
    (pct(wWait, 50) - wokenFloorP50).toFixed(2),
    (pct(lgWait, 50) - wokenFloorP50).toFixed(2),
    ratio(pct(lgWait, 50) - wokenFloorP50, pct(wWait, 50) - wokenFloorP50),
  );
  line("  the same, fetch as the client (ms)", (pct(wFetch, 50) - wokenFloorP50).toFixed(2), "", "");
  line(
    "  the same over the hot-loop floor (ms)",
    (pct(wWait, 50) - floor).toFixed(2),
    (pct(lgWait, 50) - floor).toFixed(2),
    ratio(pct(lgWait, 50) - floor, pct(wWait, 50) - floor),
  );
  line(
    "  the same at p10 (ms)",
    (pct(wWait, 10) - pct(wokenS, 10)).toFixed(2),
    (pct(lgWait, 10) - pct(wokenS, 10)).toFixed(2),
    ratio(pct(lgWait, 10) - pct(wokenS, 10), pct(wWait, 10) - pct(wokenS, 10)),
  );
  line(
    "CPU over graph.ainvoke per run (ms)",
    (cpuPerRun[0] - floorCpu).toFixed(2),
    (cpuPerRun[1] - floorCpu).toFixed(2),
    ratio(cpuPerRun[1] - floorCpu, cpuPerRun[0] - floorCpu),
  );

  // The bridge alone (no HTTP, no run rows): a run, and a request that does nothing (the pipes'
  // round trip). Tried and measured, not kept: writing the frames of one event-loop turn in one
  // write on both sides (one wake-up per batch): no gain for a lone client, and 30 to 40 % fewer
  // runs/s with 16 concurrent runs (the batch waits for the turn to end while the other side idles).
  // Nor, measured with two servers sampled interleaved under shared load: a run's events held until
  // its result (one write per run, the most any coalescing can save) did not move /runs/wait p10
  // (5.27 vs 5.23 ms, 5.13 vs 5.02); events written when the run's step yields, results at once
  // (the event's pipe wake-up off the run's path while a sync node runs in its thread), neither
  // (p10 4.73 vs 4.74, 5.96 vs 6.00; 16 clients 74 vs 59, 56 vs 62 runs/s: noise).
  const wPy = wharfPython(echoDir);
  let bridgeP50: number | null = null;
  if (wPy) {
    const worker = new PythonWorker({
      python: wPy,
      projectDir: echoDir,
      graphs: { echo: "./echo.py:graph" },
      auth: null,
      checkpointer: { kind: "sqlite", path: path.join(work, "bridge-checkpoints.sqlite") },
      log: createLogger({ level: "silent" }),
    });
    await worker.start();
    let i = 0;
    const run = async () => {
      const t = performance.now();
      await echoRunOnWorker(worker, i++, input);
      return performance.now() - t;
    };
    const ping = async () => {
      const t = performance.now();
      // A cancel of no run: the worker answers at once.
      await worker.request("run.cancel", { run_id: "none" });
      return performance.now() - t;
    };
    const [bridge, pings, wokenB] = await interleaved([run, ping, woken.once], N);
    // Over the floor sampled beside it, so both are taken at the same moments of the load.
    bridgeP50 = pct(bridge, 50) - pct(wokenB, 50);
    await worker.stop();
    console.log(
      `  the bridge alone: a run p50 ${pct(bridge, 50).toFixed(2)} ms (${bridgeP50.toFixed(2)} over graph.ainvoke sampled beside it); a request that does nothing p50 ${pct(pings, 50).toFixed(2)} ms`,
    );
  }

  woken.stop();

  // The custom-auth handler's round trip: the same request with and without the project's Auth.
  const wa = await wharf(authDir, "wharf (auth)", auth);
  servers.push(wa);
  const lga = await langgraphDev(authDir, "langgraph dev (auth)", auth);
  servers.push(lga);
  const [sWa, sW, sLga, sLg] = (
    await interleaved([() => search(wa), () => search(w), () => search(lga), () => search(lg)], N)
  ).map(median);
  line("auth handler round trip p50 (ms)", (sWa - sW).toFixed(2), (sLga - sLg).toFixed(2), ratio(sLga - sLg, sWa - sW));
  // The auth handler alone over the bridge (what the worker adds to a request of an authenticated
  // project), beside the HTTP figure below, which also holds the server's auth middleware and routes.
  const aPy = wharfPython(authDir);
  if (aPy) {
    const worker = new PythonWorker({
      python: aPy,
      projectDir: authDir,
      graphs: { echo: "./echo.py:graph" },
      auth: "./auth.py:auth",
      checkpointer: { kind: "sqlite", path: path.join(work, "bridge-auth-checkpoints.sqlite") },
      log: createLogger({ level: "silent" }),
    });
    await worker.start();
    const headers = [
      ["host", "127.0.0.1"],
      ["content-type", "application/json"],
      ["authorization", "Bearer bench"],
      ["accept", "*/*"],
    ];
    const authOnce = async () => {
      const t = performance.now();
      await worker.call("auth.authenticate", {
        method: "POST",
        path: "/assistants/search",
        query: "",
        headers,
        body: null,
      });
      return performance.now() - t;
    };
    const [auths] = await interleaved([authOnce], N);
    await worker.stop();
    console.log(`  the auth handler over the bridge alone: p50 ${pct(auths, 50).toFixed(3)} ms`);
  }

  const js = await samples(() => wait(wm, "js_echo"), N);
  const jsRps = await throughput(() => wait(wm, "js_echo"), N);
  console.log(
    `  for reference, the JS echo graph in Wharf: /runs/wait p50 ${pct(js, 50).toFixed(2)} ms, ${jsRps.toFixed(0)} runs/s with 16 clients`,
  );

  // Where the overhead over graph.ainvoke goes, stage by stage (p50s, each stage the difference of
  // two measured paths): the worker's own run (astream, event mapping, serialisation) in one
  // process; the pipes and the worker's request loop (the bridge alone); the server's run path
  // (run row, queue, executor, result), from the JavaScript echo graph on the same server, less
  // the same graph invoked here; and HTTP (a request that does nothing, GET /ok). The Python and
  // JavaScript runs are sampled interleaved on the mixed server.
  const jsGraph = (await import(path.join(mixed, "js/echo.ts"))) as {
    graph: { invoke(i: unknown): Promise<unknown> };
  };
  const jsInvoke = async () => {
    const t = performance.now();
    await jsGraph.graph.invoke(input);
    return performance.now() - t;
  };
  const okOnce = async () => {
    const t = performance.now();
    await (await fetch(`${wm.url}/ok`)).text();
    return performance.now() - t;
  };
  const [jsFloor, okMs, jsWait, pyWait] = (
    await interleaved([jsInvoke, okOnce, () => wait(wm, "js_echo"), () => wait(wm, "echo")], N)
  ).map(median);
  const stage = (what: string, ms: number) => console.log(`    ${what.padEnd(62)} ${ms.toFixed(2).padStart(7)} ms`);
  console.log("  where the Python run's overhead over graph.ainvoke goes (p50s, ms):");
  stage("the worker's run path in one process (over graph.ainvoke)", workerRun - floor);
  if (bridgeP50 !== null)
    stage("pipes and request loop (the bridge alone, over that)", bridgeP50 - (workerRun - floor));
  stage("HTTP alone (GET /ok)", okMs);
  stage("the server's run path (JS echo /runs/wait - its invoke - /ok)", jsWait - jsFloor - okMs);
  stage("Python echo /runs/wait - JS echo /runs/wait (same server)", pyWait - jsWait);
} finally {
  await stopAll();
}
