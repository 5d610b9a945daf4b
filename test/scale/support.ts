import { spawn, type ChildProcess } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { TestContext } from "node:test";
import pg from "pg";
import { tempHome } from "../support/dialects.ts";
import { TEST_LOCAL_ROOTS } from "../support/platform.ts";
import { freePort, REPO_ROOT, waitForOk, WHARF_BIN } from "../support/process.ts";
import { isRoot, POSTGRES_URL, postgresReachable, requireCapability } from "../support/requirements.ts";
import { BASE_CACHE } from "../sandboxes/support.ts";

/** One Wharf replica: a real `wharf up` process of its own, with its own home, on loopback ports. */
export interface Replica {
  name: string;
  url: string;
  internalUrl: string;
  home: string;
  child: ChildProcess;
  output(): string;
  exited: Promise<number | null>;
}

export interface ReplicaSet {
  replicas: Replica[];
  apiKey: string;
  masterKey: string;
  schema: string;
  databaseUrl: string;
  /** A query against the replicas' schema. */
  query<T = Record<string, unknown>>(text: string, values?: unknown[]): Promise<T[]>;
  /** Starts one more replica on the same database and key (or again on a home it had). */
  start(name: string, home?: string): Promise<Replica>;
  /** kill -9 of the replica's process (its sandboxes' processes outlive it, as on a real machine). */
  kill9(r: Replica): Promise<void>;
  /** SIGTERM and wait for the exit. */
  stop(r: Replica): Promise<void>;
}

/**
 * Several replicas on one PostgreSQL schema (fresh per test, dropped after) with one master key.
 * Null (skipped loudly, a failure in strict mode) without PostgreSQL or root.
 */
export async function startReplicas(
  t: TestContext,
  names: string[],
  env: Record<string, string> = {},
): Promise<ReplicaSet | null> {
  if (!requireCapability(t, await postgresReachable(), `PostgreSQL is not reachable at ${POSTGRES_URL}`)) return null;
  if (
    !requireCapability(
      t,
      process.platform === "linux" && isRoot(),
      "replicas run sandboxes and confined revisions: root on Linux",
    )
  )
    return null;
  let set: (ReplicaSet & { close(): Promise<void> }) | null = null;
  t.after(async () => set?.close());
  set = await launchReplicas(names, env, (s) => (set = s));
  return set;
}

/**
 * The same without a test (benchmarks): `close` stops every replica and drops the schema. `early`
 * gets the set before the first replica starts, so a failed start still cleans up.
 */
export async function launchReplicas(
  names: string[],
  env: Record<string, string> = {},
  early: (s: ReplicaSet & { close(): Promise<void> }) => void = () => {},
): Promise<ReplicaSet & { close(): Promise<void> }> {
  const schema = `wharf_t_${crypto.randomBytes(6).toString("hex")}`;
  const admin = new pg.Pool({ connectionString: POSTGRES_URL, max: 2, options: `-c search_path=${schema}` });
  await admin.query(`CREATE SCHEMA "${schema}"`);
  const databaseUrl = `${POSTGRES_URL}${POSTGRES_URL.includes("?") ? "&" : "?"}options=${encodeURIComponent(`-c search_path=${schema}`)}`;
  const masterKey = crypto.randomBytes(32).toString("base64");
  const all: Replica[] = [];
  const homes: string[] = [];

  const start = async (name: string, home?: string): Promise<Replica> => {
    const h = home ?? tempHome(`wharf-replica-${name}-`);
    if (!home) homes.push(h);
    const [port, internal] = [await freePort(), await freePort()];
    const child = spawn(process.execPath, [WHARF_BIN, "up", "--no-supervisor"], {
      cwd: REPO_ROOT,
      env: {
        ...process.env,
        WHARF_LOG_LEVEL: "info",
        WHARF_HOME: h,
        WHARF_HOST: "127.0.0.1",
        WHARF_PORT: String(port),
        DATABASE_URL: databaseUrl,
        WHARF_MASTER_KEY: masterKey,
        WHARF_INTERNAL_LISTEN: `127.0.0.1:${internal}`,
        WHARF_REPLICA_LEASE_MS: "3000",
        WHARF_EXAMPLE_PROJECT: "off",
        WHARF_AGENT_PORT: "0",
        WHARF_SANDBOX_BASE_CACHE: BASE_CACHE,
        WHARF_SANDBOX_TICK_MS: "250",
        WHARF_SANDBOX_WARM_POOL: "0",
        WHARF_DEPLOY_LOCAL_ROOTS: TEST_LOCAL_ROOTS,
        ...env,
      },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let out = "";
    child.stdout!.on("data", (d) => (out += d));
    child.stderr!.on("data", (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const r: Replica = {
      name,
      url: `http://127.0.0.1:${port}`,
      internalUrl: `http://127.0.0.1:${internal}`,
      home: h,
      child,
      output: () => out,
      exited,
    };
    all.push(r);
    const began = Date.now();
    try {
      await waitForOk(`${r.url}/ok`, 60_000);
      // Registered once the internal listener answers (401 to an unsigned request).
      for (let i = 0; ; i++) {
        const res = await fetch(`${r.internalUrl}/ok`).catch(() => null);
        if (res?.status === 401) break;
        if (i > 400) throw new Error("internal listener did not come up");
        await new Promise((res) => setTimeout(res, 50));
      }
    } catch (err) {
      throw new Error(`replica ${name} did not start: ${(err as Error).message}\n${out.slice(-4000)}`, { cause: err });
    }
    console.log(`replica ${name} serving after ${Date.now() - began} ms`);
    return r;
  };
  const stop = async (r: Replica) => {
    if (r.child.exitCode !== null || r.child.signalCode !== null) return;
    r.child.kill("SIGTERM");
    const timer = setTimeout(() => r.child.kill("SIGKILL"), 30_000);
    await r.exited;
    clearTimeout(timer);
  };
  const set: ReplicaSet & { close(): Promise<void> } = {
    replicas: all,
    apiKey: "",
    masterKey,
    schema,
    databaseUrl,
    query: async (text, values) => (await admin.query(text, values)).rows,
    start,
    stop,
    kill9: async (r) => {
      r.child.kill("SIGKILL");
      await r.exited;
    },
    close: async () => {
      await Promise.all(all.map(stop));
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await admin.end();
      for (const h of homes) fs.rmSync(h, { recursive: true, force: true });
    },
  };
  early(set);
  // The first replica migrates and bootstraps; the others join the same database.
  const first = await start(names[0]);
  set.apiKey = fs.readFileSync(path.join(first.home, "bootstrap-key"), "utf8").trim();
  await Promise.all(names.slice(1).map((n) => start(n)));
  return set;
}

/** The replica id a home was given (the file `wharf up` writes on first start). */
export const replicaId = (home: string): string =>
  fs.readFileSync(path.join(home, "deployments", "node-id"), "utf8").trim();

/** Polls until `check` returns a truthy value; fails after `timeoutMs`. */
export async function waitFor<T>(
  check: () => Promise<T | false | null | undefined>,
  timeoutMs: number,
  what: string,
  everyMs = 100,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
