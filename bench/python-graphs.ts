// Stateless /runs/wait on the same one-node echo graph written in Python (run by the project's
// Python worker) and in JavaScript (run by the server itself), served by one Wharf agent server for
// a mixed project, measured in the same run; plus the Python graph's in-process `graph.ainvoke`
// (the floor the worker and the server add their overhead to). The server is its own process.
//   node bin/run-ts.js bench/python-graphs.ts [--quick]
// The project's virtual environment is cached in $WHARF_PYTHON_ENVS (default /tmp/wharf-test-python-envs).
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const project = path.join(root, "test/agent-server/fixtures/python-mixed");
const quick = process.argv.includes("--quick");
const N = quick ? 100 : 400;
const envs = process.env.WHARF_PYTHON_ENVS || "/tmp/wharf-test-python-envs";

const pct = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
const port = await new Promise<number>((resolve) => {
  const s = net.createServer().listen(0, "127.0.0.1", () => {
    const p = (s.address() as net.AddressInfo).port;
    s.close(() => resolve(p));
  });
});
const url = `http://127.0.0.1:${port}`;
const home = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-py-"));
const child = spawn(process.execPath, [path.join(root, "bin/wharf.js"), "agent-server", "--project", project, "--port", String(port), "--open"], {
  env: { ...process.env, WHARF_HOME: home, WHARF_PYTHON_ENVS: envs, WHARF_LOG_LEVEL: "warn" },
  stdio: ["ignore", "ignore", "inherit"],
});
const t0 = performance.now();
for (;;) {
  if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
  if (await fetch(`${url}/ok`).then((r) => r.ok, () => false)) break;
  await new Promise((r) => setTimeout(r, 100));
}
const startMs = performance.now() - t0;

const body = (graph: string) => JSON.stringify({ assistant_id: graph, input: { messages: [{ role: "human", content: "hi" }] } });
async function once(graph: string): Promise<number> {
  const t = performance.now();
  const r = await fetch(`${url}/runs/wait`, { method: "POST", headers: { "content-type": "application/json" }, body: body(graph) });
  const text = await r.text();
  if (!r.ok || !text.includes("echo: hi")) throw new Error(`bad answer ${r.status}: ${text.slice(0, 200)}`);
  return performance.now() - t;
}

async function measure(graph: string) {
  for (let i = 0; i < 30; i++) await once(graph);
  const lat: number[] = [];
  for (let i = 0; i < N; i++) lat.push(await once(graph));
  lat.sort((a, b) => a - b);
  const t = performance.now();
  let done = 0;
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (done < N) {
      done++;
      await once(graph);
    }
  }));
  return { p50: pct(lat, 50), p99: pct(lat, 99), rps: N / ((performance.now() - t) / 1000) };
}

try {
  const py = await measure("echo");
  const js = await measure("js_echo");
  // The floor: the same Python graph invoked in one process with the worker's interpreter.
  // Every cached environment has langgraph (the worker's needs); the graph imports from the fixture.
  const venvPython = fs.readdirSync(envs).map((d) => path.join(envs, d, "bin/python")).find((p) => fs.existsSync(p));
  const floor = venvPython
    ? Number(execFileSync(venvPython, ["-c", `import asyncio, time, statistics, sys
sys.path.insert(0, ${JSON.stringify(path.join(project, "src"))})
from graphs.echo import graph
async def main():
    inp = {"messages": [{"role": "human", "content": "hi"}]}
    for _ in range(50): await graph.ainvoke(inp)
    t = []
    for _ in range(${N}):
        s = time.perf_counter(); await graph.ainvoke(inp); t.append((time.perf_counter() - s) * 1000)
    print(statistics.median(t))
asyncio.run(main())`]).toString().trim())
    : NaN;
  const rss = Number(execFileSync("ps", ["-o", "rss=", "--ppid", String(child.pid)]).toString().trim().split(/\s+/)[0] ?? 0) / 1024;
  console.log(`server start (env cached, worker hello included): ${startMs.toFixed(0)} ms; Python worker RSS ${rss.toFixed(0)} MB`);
  console.log(`stateless /runs/wait, ${N} sequential then 16 clients:`);
  console.log(`  Python echo (worker): p50 ${py.p50.toFixed(2)} ms  p99 ${py.p99.toFixed(2)} ms  ${py.rps.toFixed(0)} runs/s`);
  console.log(`  JS echo (in server):  p50 ${js.p50.toFixed(2)} ms  p99 ${js.p99.toFixed(2)} ms  ${js.rps.toFixed(0)} runs/s`);
  console.log(`  Python graph.ainvoke in one process: p50 ${floor.toFixed(2)} ms (server + worker overhead ${(py.p50 - floor).toFixed(2)} ms)`);
} finally {
  child.kill("SIGTERM");
  await new Promise((r) => child.once("exit", r));
  fs.rmSync(home, { recursive: true, force: true });
}
