/**
 * Control-plane figures, each beside a baseline from the same run:
 *  - start-up time of `wharf up` to a 200 from /ok and to the first API answer (first start with
 *    migrations, and a restart), against a bare Node HTTP server started the same way;
 *  - requests/s and p50 of an authenticated GET /v2/secrets on SQLite and on PostgreSQL, against
 *    the same server's unauthenticated GET /ok and a bare Node HTTP server.
 * Run: node bin/run-ts.js bench/foundation-control-plane.ts [seconds-per-row]
 */
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { freePort, waitForOk, WHARF_BIN } from "../test/support/process.ts";

const SECONDS = Number(process.argv[2] ?? 5);
const CONNECTIONS = 16;
const PG_URL = process.env.WHARF_TEST_DATABASE_URL || "postgres://postgres@127.0.0.1:5432/test";

async function startProcess(
  args: string[],
  env: Record<string, string>,
  cwd: string,
  okUrl: string,
): Promise<{ child: ChildProcess; ms: number; apiMs: number }> {
  const t0 = performance.now();
  const child = spawn(process.execPath, args, {
    cwd,
    env: { ...process.env, WHARF_LOG_LEVEL: "warn", ...env },
    stdio: "ignore",
  });
  const ms = await waitForOk(okUrl, 30_000);
  return { child, ms, apiMs: performance.now() - t0 };
}

async function stop(child: ChildProcess): Promise<void> {
  const done = new Promise((r) => child.once("exit", r));
  child.kill("SIGTERM");
  await done;
}

interface LoadResult {
  rps: number;
  p50: number;
  p99: number;
  errors: number;
}

/** Keep-alive load from `CONNECTIONS` concurrent loops for `SECONDS`. */
async function load(url: string, headers: Record<string, string>): Promise<LoadResult> {
  const agent = new http.Agent({ keepAlive: true, maxSockets: CONNECTIONS });
  const u = new URL(url);
  const latencies: number[] = [];
  let errors = 0;
  const deadline = performance.now() + SECONDS * 1000;
  const one = () =>
    new Promise<void>((resolve) => {
      const t0 = performance.now();
      const req = http.request({ host: u.hostname, port: u.port, path: u.pathname, agent, headers }, (res) => {
        res.resume();
        res.on("end", () => {
          if (res.statusCode !== 200) errors++;
          latencies.push(performance.now() - t0);
          resolve();
        });
      });
      req.on("error", () => {
        errors++;
        resolve();
      });
      req.end();
    });
  // Warm-up, then measure.
  for (let i = 0; i < 200; i++) await one();
  latencies.length = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < deadline) await one();
    }),
  );
  const elapsed = (performance.now() - started) / 1000;
  agent.destroy();
  latencies.sort((a, b) => a - b);
  return {
    rps: latencies.length / elapsed,
    p50: latencies[Math.floor(latencies.length / 2)],
    p99: latencies[Math.floor(latencies.length * 0.99)],
    errors,
  };
}

const fmt = (n: number, d = 0) => n.toFixed(d).padStart(9);

async function main() {
  const rows: string[] = [];
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-bench-"));

  // Baseline: a bare Node HTTP server, started and loaded the same way.
  const barePort = await freePort();
  const bareFile = path.join(tmp, "bare.mjs");
  fs.writeFileSync(
    bareFile,
    `import http from "node:http"; http.createServer((q,s)=>{s.setHeader("content-type","application/json");s.end('{"ok":true}')}).listen(${barePort},"127.0.0.1");`,
  );
  const bare = await startProcess([bareFile], {}, tmp, `http://127.0.0.1:${barePort}/ok`);
  const bareLoad = await load(`http://127.0.0.1:${barePort}/ok`, {});
  await stop(bare.child);

  // Start-up.
  const starts: number[] = [];
  const restarts: number[] = [];
  const apiStarts: number[] = [];
  const apiRestarts: number[] = [];
  let sqlite: { child: ChildProcess; port: number; key: string } | null = null;
  for (let i = 0; i < 3; i++) {
    const cwd = fs.mkdtempSync(path.join(tmp, "home-"));
    const port = await freePort();
    const first = await startProcess(
      [WHARF_BIN, "up"],
      { WHARF_PORT: String(port) },
      cwd,
      `http://127.0.0.1:${port}/ok`,
    );
    starts.push(first.ms);
    apiStarts.push(first.apiMs);
    await stop(first.child);
    const again = await startProcess(
      [WHARF_BIN, "up"],
      { WHARF_PORT: String(port) },
      cwd,
      `http://127.0.0.1:${port}/ok`,
    );
    restarts.push(again.ms);
    apiRestarts.push(again.apiMs);
    if (i === 2)
      sqlite = {
        child: again.child,
        port,
        key: fs.readFileSync(path.join(cwd, ".wharf/bootstrap-key"), "utf8").trim(),
      };
    else await stop(again.child);
  }
  const med = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
  rows.push(
    `start-up to /ok, first start (median of 3): ${med(starts).toFixed(0)} ms; restart: ${med(restarts).toFixed(0)} ms; bare Node server: ${bare.ms.toFixed(0)} ms (ratio ${(med(restarts) / bare.ms).toFixed(1)}x)`,
  );
  rows.push(
    `start-up to the first API answer, first start: ${med(apiStarts).toFixed(0)} ms; restart: ${med(apiRestarts).toFixed(0)} ms (ratio to the bare server ${(med(apiRestarts) / bare.ms).toFixed(1)}x)`,
  );

  const seedAndLoad = async (port: number, key: string) => {
    await fetch(`http://127.0.0.1:${port}/v2/secrets`, {
      method: "PUT",
      headers: { "X-Api-Key": key },
      body: JSON.stringify(Array.from({ length: 10 }, (_, i) => ({ key: `S${i}`, value: "v" }))),
    });
    return {
      ok: await load(`http://127.0.0.1:${port}/ok`, {}),
      secrets: await load(`http://127.0.0.1:${port}/v2/secrets`, { "X-Api-Key": key }),
    };
  };
  const sq = await seedAndLoad(sqlite!.port, sqlite!.key);
  await stop(sqlite!.child);

  // PostgreSQL in its own schema.
  const schema = `wharf_bench_${process.pid}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
  const pgUrl = new URL(PG_URL);
  pgUrl.searchParams.set("options", `-c search_path=${schema}`);
  const pgHome = fs.mkdtempSync(path.join(tmp, "pg-"));
  const pgPort = await freePort();
  const pgProc = await startProcess(
    [WHARF_BIN, "up"],
    { WHARF_PORT: String(pgPort), WHARF_HOME: pgHome, DATABASE_URL: pgUrl.toString() },
    tmp,
    `http://127.0.0.1:${pgPort}/ok`,
  );
  const pq = await seedAndLoad(pgPort, fs.readFileSync(path.join(pgHome, "bootstrap-key"), "utf8").trim());
  await stop(pgProc.child);
  await admin.query(`DROP SCHEMA ${schema} CASCADE`);
  await admin.end();

  console.log(
    `\nWharf control plane, ${CONNECTIONS} keep-alive connections, ${SECONDS} s per row, ${os.cpus().length} cores\n`,
  );
  console.log(rows.join("\n") + "\n");
  console.log("row                                   req/s   p50 ms   p99 ms   errors   vs bare Node");
  const line = (name: string, r: LoadResult) =>
    console.log(
      `${name.padEnd(34)}${fmt(r.rps)}${fmt(r.p50, 2)}${fmt(r.p99, 2)}${fmt(r.errors)}${fmt(r.rps / bareLoad.rps, 2)}x`,
    );
  line("bare Node http server /ok", bareLoad);
  line("wharf GET /ok (SQLite)", sq.ok);
  line("wharf GET /v2/secrets (SQLite)", sq.secrets);
  line("wharf GET /ok (PostgreSQL)", pq.ok);
  line("wharf GET /v2/secrets (PostgreSQL)", pq.secrets);
  fs.rmSync(tmp, { recursive: true, force: true });
}

await main();
