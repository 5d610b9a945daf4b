// Stateless /runs/wait and /runs/stream on a trivial graph (one node echoing the last message):
// Wharf on SQLite and on PostgreSQL against the LangGraph JS dev server (`langgraphjs dev`), measured
// in the same run on the same machine, plus the same graph invoked in this process (the floor a
// server adds its overhead to). Each server is its own process; this process is the client.
// /runs/wait is sent by node:http on kept-alive sockets (bench/lean-client.ts), so the figures hold the
// servers' time and not the client's; the same request by fetch is sampled interleaved and printed after.
//   node bin/run-ts.js bench/agent-server-runs.ts [--quick]
// The reference (`@langchain/langgraph-cli`) is not a dependency of the project: it is installed on
// first use into $WHARF_BENCH_CACHE (default ~/.cache/wharf-bench/langgraph-cli-<version>) with npm.
import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { graph as echoGraph } from "../examples/echo-agent/src/echo.ts";
import { timedPost } from "./lean-client.ts";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const quick = process.argv.includes("--quick");
const PG_URL = process.env.WHARF_TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";
const body = JSON.stringify({ assistant_id: "echo", input: { messages: [{ role: "human", content: "hi" }] } });
const streamBody = JSON.stringify({
  assistant_id: "echo",
  input: { messages: [{ role: "human", content: "hi" }] },
  stream_mode: "updates",
});
const children: ChildProcess[] = [];

function pct(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function waitReady(url: string, child: ChildProcess, ms: number): Promise<void> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`server exited with ${child.exitCode}`);
    try {
      const r = await fetch(`${url}/runs/wait`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body,
      });
      if (r.ok && (await r.text()).includes("echo: hi")) return;
    } catch {}
    await new Promise((r) => setTimeout(r, 250));
  }
  throw new Error(`not ready after ${ms} ms`);
}

/** A stateless /runs/wait from the lean client (the figures hold the server's time, not the client's). */
const waitOnce = (url: string) => timedPost(`${url}/runs/wait`, body, { expect: "echo: hi" });
/** The same request through `fetch`, for the figure a fetch client sees. */
const waitFetch = (url: string) => timedPost(`${url}/runs/wait`, body, { expect: "echo: hi", via: "fetch" });

/** Time to the first `updates` event and to the end of the stream. */
async function streamOnce(url: string): Promise<[number, number]> {
  const t0 = performance.now();
  const r = await fetch(`${url}/runs/stream`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: streamBody,
  });
  const reader = r.body!.getReader();
  const dec = new TextDecoder();
  let text = "";
  let first = -1;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    text += dec.decode(value, { stream: true });
    if (first < 0 && text.includes("event: updates")) first = performance.now() - t0;
  }
  if (first < 0) throw new Error(`no updates event: ${text.slice(0, 200)}`);
  return [first, performance.now() - t0];
}

interface Figures {
  p50: number;
  fetchP50: number;
  p99: number;
  rps16: number;
  firstUpdateP50: number;
  streamEndP50: number;
}

async function measure(url: string, sequential: number, seconds: number): Promise<Figures> {
  for (let i = 0; i < Math.min(20, sequential); i++) {
    await waitOnce(url);
    await waitFetch(url);
  }
  const lat: number[] = [];
  const latFetch: number[] = [];
  for (let i = 0; i < sequential; i++) {
    lat.push(await waitOnce(url));
    latFetch.push(await waitFetch(url));
  }
  lat.sort((a, b) => a - b);
  latFetch.sort((a, b) => a - b);
  const first: number[] = [];
  const end: number[] = [];
  for (let i = 0; i < Math.max(10, Math.floor(sequential / 2)); i++) {
    const [f, e] = await streamOnce(url);
    first.push(f);
    end.push(e);
  }
  first.sort((a, b) => a - b);
  end.sort((a, b) => a - b);
  let done = 0;
  const stopAt = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (performance.now() < stopAt) {
        await waitOnce(url);
        done++;
      }
    }),
  );
  const rps16 = done / ((performance.now() - started) / 1000);
  return {
    p50: pct(lat, 50),
    fetchP50: pct(latFetch, 50),
    p99: pct(lat, 99),
    rps16,
    firstUpdateP50: pct(first, 50),
    streamEndP50: pct(end, 50),
  };
}

function wharfServer(port: number, env: Record<string, string>): ChildProcess {
  const child = spawn(
    process.execPath,
    [
      path.join(root, "bin/wharf.js"),
      "agent-server",
      "--project",
      path.join(root, "examples/echo-agent"),
      "--port",
      String(port),
      "--open",
      "--server-id",
      `bench-${process.pid}`,
    ],
    {
      env: { ...process.env, WHARF_LOG_LEVEL: "warn", ...env },
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  children.push(child);
  return child;
}

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });
}

/**
 * The versions the reference figures are taken with: npm's `latest` line of the LangGraph JS server
 * (langgraph-cli 1.5.1, which serves through langgraph-api 1.5.1; its 2.0.0 is an older release, of
 * 2026-06) and the LangGraph Wharf ships.
 */
const REFERENCE_PACKAGES = ["@langchain/langgraph-cli@1.5.1", "@langchain/langgraph@1.7.3", "@langchain/core@^1.1.0"];

/** The reference CLI's folder, installed there on first use (outside the project: `npm ci` stays clean). */
function referenceInstall(): string {
  const dir = process.env.WHARF_BENCH_CACHE || path.join(os.homedir(), ".cache/wharf-bench/langgraph-cli-1.5.1");
  const bin = path.join(dir, "node_modules/.bin/langgraphjs");
  if (fs.existsSync(bin)) return dir;
  fs.mkdirSync(dir, { recursive: true });
  if (!fs.existsSync(path.join(dir, "package.json")))
    fs.writeFileSync(
      path.join(dir, "package.json"),
      '{"name":"wharf-bench-reference","private":true,"type":"module"}\n',
    );
  console.error(`installing the reference server (${REFERENCE_PACKAGES.join(" ")}) into ${dir} …`);
  execFileSync(
    "npm",
    ["install", "--prefix", dir, "--no-fund", "--no-audit", "--loglevel=error", ...REFERENCE_PACKAGES],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
  if (!fs.existsSync(bin)) throw new Error(`npm install did not produce ${bin}`);
  return dir;
}

/**
 * The reference: `langgraphjs dev` on a copy of the same project (it writes .langgraph_api/ there),
 * resolving packages from the reference's own folder so graph and server share one LangGraph.
 */
function referenceServer(port: number): ChildProcess {
  const install = referenceInstall();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "lg-ref-"));
  fs.cpSync(path.join(root, "examples/echo-agent"), dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "package.json"), '{"type":"module"}');
  fs.symlinkSync(path.join(install, "node_modules"), path.join(dir, "node_modules"));
  const child = spawn(
    path.join(install, "node_modules/.bin/langgraphjs"),
    [
      "dev",
      "--port",
      String(port),
      "--host",
      "127.0.0.1",
      "--no-browser",
      "--config",
      path.join(dir, "langgraph.json"),
    ],
    {
      cwd: dir,
      env: { ...process.env, LANGSMITH_TRACING: "false", LANGCHAIN_TRACING_V2: "false" },
      stdio: ["ignore", "ignore", "ignore"],
      detached: true,
    },
  );
  children.push(child);
  return child;
}

function stopAll(): void {
  for (const c of children) {
    try {
      if (c.pid) process.kill(-c.pid, "SIGTERM");
    } catch {
      c.kill("SIGTERM");
    }
  }
}
process.on("exit", stopAll);

const fmt = (n: number) => (n >= 100 ? n.toFixed(0) : n.toFixed(2));
const rows: Array<[string, Figures | string]> = [];
const seq = quick ? 100 : 300;
const secs = quick ? 3 : 5;

/** The same graph invoked in this process: p50 of `graph.invoke` (what a run costs without a server). */
async function inProcessP50(n: number): Promise<number> {
  const input = { messages: [{ role: "human", content: "hi" }] };
  for (let i = 0; i < 50; i++) await echoGraph.invoke(input);
  const lat: number[] = [];
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    await echoGraph.invoke(input);
    lat.push(performance.now() - t0);
  }
  return pct(
    lat.sort((a, b) => a - b),
    50,
  );
}
const floor = await inProcessP50(seq);

const home = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-"));
{
  const port = await freePort();
  const child = wharfServer(port, { WHARF_HOME: home, DATABASE_URL: "" });
  await waitReady(`http://127.0.0.1:${port}`, child, 120_000);
  rows.push(["wharf (SQLite)", await measure(`http://127.0.0.1:${port}`, seq, secs)]);
  child.kill("SIGTERM");
}

const dbName = `wharf_bench_${process.pid}`;
let admin: pg.Client | null = new pg.Client({ connectionString: PG_URL, connectionTimeoutMillis: 2000 });
try {
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const url = new URL(PG_URL);
  url.pathname = `/${dbName}`;
  const port = await freePort();
  const child = wharfServer(port, {
    WHARF_HOME: fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-pg-")),
    DATABASE_URL: url.toString(),
  });
  await waitReady(`http://127.0.0.1:${port}`, child, 120_000);
  rows.push(["wharf (PostgreSQL)", await measure(`http://127.0.0.1:${port}`, seq, secs)]);
  child.kill("SIGTERM");
  await new Promise((r) => setTimeout(r, 1000));
} catch (err) {
  rows.push(["wharf (PostgreSQL)", `not measured: ${(err as Error).message}`]);
  admin = null;
}

try {
  const port = await freePort();
  const child = referenceServer(port);
  await waitReady(`http://127.0.0.1:${port}`, child, 90_000);
  rows.push(["langgraphjs dev (reference)", await measure(`http://127.0.0.1:${port}`, quick ? 20 : 40, secs)]);
} catch (err) {
  rows.push(["langgraphjs dev (reference)", `not measured: ${(err as Error).message}`]);
}
stopAll();
if (admin) {
  await new Promise((r) => setTimeout(r, 500));
  await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => {});
  await admin.end();
}

const ref = rows.find(([n]) => n.startsWith("langgraphjs"))?.[1];
console.log(
  `\nstateless runs on a one-node echo graph (${os.cpus().length} cores, Node ${process.version}; client and servers on this machine)\n`,
);
console.log(`in-process graph.invoke p50: ${fmt(floor)} ms (run overhead = wait p50 − this)\n`);
console.log(
  "server                       | wait p50 ms | wait p99 ms | req/s @16 | first update p50 ms | stream end p50 ms | overhead ms | p50 vs ref | req/s vs ref",
);
console.log(
  "-----------------------------|-------------|-------------|-----------|---------------------|-------------------|-------------|------------|-------------",
);
for (const [name, f] of rows) {
  if (typeof f === "string") {
    console.log(`${name.padEnd(28)} | ${f}`);
    continue;
  }
  const ratios =
    ref && typeof ref !== "string" ? [`${fmt(ref.p50 / f.p50)}x faster`, `${fmt(f.rps16 / ref.rps16)}x`] : ["-", "-"];
  console.log(
    `${name.padEnd(28)} | ${fmt(f.p50).padStart(11)} | ${fmt(f.p99).padStart(11)} | ${fmt(f.rps16).padStart(9)} | ${fmt(f.firstUpdateP50).padStart(19)} | ${fmt(f.streamEndP50).padStart(17)} | ${fmt(f.p50 - floor).padStart(11)} | ${ratios[0].padStart(10)} | ${ratios[1].padStart(11)}`,
  );
}
console.log(
  `\n/runs/wait is sent by node:http on kept-alive sockets (bench/lean-client.ts); the same request by fetch, interleaved, p50: ${rows
    .map(([n, f]) =>
      typeof f === "string" ? null : `${n} ${fmt(f.fetchP50)} ms (overhead ${fmt(f.fetchP50 - floor)})`,
    )
    .filter(Boolean)
    .join(", ")}`,
);
// What bought what: shares of the Wharf (SQLite) server's CPU profile (node --cpu-prof) under 16
// concurrent /runs/wait, before and after each change, measured on this benchmark's graph.
console.log(`
what the profile showed and what was done (share of the server's CPU under 16 concurrent /runs/wait):
  SQLite statement re-prepared on every query (better-sqlite3 prepare) 6.2% -> 0.6%: statements kept per SQL text (src/store/statement-cache.ts)
  full housekeeping pass after every run when slots are limited         4.7% -> 3.0%: a freed slot only starts queued runs (runs/run-housekeeping.ts startQueued)
  a freed slot scanning the table for runs queued for one              2.6-2.9% -> 1.7-2.1%: runs queued here for a slot are claimed on their thread at once (runs/run-passes.ts)
  a Headers object built to copy x- headers into each run's config     0.5-0.6% -> 0-0.1%: read from Node's raw headers (api/run-routes.ts)
  freed slot scanning for runs other processes queued, after every run 2.5-2.6% -> 0%: only after such a process's wake (runs/run-passes.ts othersMayWait)
  Kysely building and compiling the run path's queries                 3.1% -> 0.1%: compiled once, run with new values (src/store/prepared-query.ts)
  the assistant read before each stateless run                          1.8% -> 0%: the run's insert checks the row it was built from is current (runs/run-queue.ts insertRun)
  (run admission as a whole, api -> engine.create: 4.2% -> 1.9%; SQLite profile at 16 clients, same graph)
round trips to PostgreSQL per stateless /runs/wait before the answer: 3 -> 1 (assistant read folded into the insert;
  the row's removal no longer awaited: a dead process's stateless rows are removed by housekeeping), plus the freed-slot
  scan (1 per run when not coalesced) gone; the run path's statements are named prepared statements (parsed and
  planned once per connection: src/store/pg-statements.ts)
  crypto.getRandomValues, one Node call per UUID (~14 per run: LangSmith   5.6% -> 0.8%: small requests served from a pooled CSPRNG buffer refilled 4 KiB at a time
    RunTrees, checkpoint ids)                                                        (runs/pooled-random.ts; -15% of the graph's own CPU in-process)
  a run queued for a slot claimed through a thread-lock transaction,   ~2.3% -> ~0.2%: a stateless one is claimed by id with one prepared update and started
    unsealed and its row's JSON parsed back                                         from what is in hand (runs/run-admission.ts)
  one DELETE per ended stateless run                                    PostgreSQL: the rows of runs ending together removed by one statement (runs/ended-rows.ts)
  (server CPU per stateless /runs/wait, interleaved A/B at 16 clients, the three above together, quiet machine: SQLite 4.55 -> 4.10 ms (-10%), PostgreSQL 4.66 -> 4.16 ms (-11%))
  LangSmith RunTree built for every node, write and branch, tracing off  5.4-7.6% (12% with its UUIDs), left: avoiding it means patching LangChain's
    internals; measured in-process, a callbacks entry named like LangChain's tracer (whose getRunTreeWithTracingConfig
    answers a plain object) skips it for -10% of the graph's CPU, but leans on undocumented internals`);
process.exit(0);
