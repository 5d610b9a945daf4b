import { spawn, execFileSync, type ChildProcess } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { TestContext } from "node:test";
import pg from "pg";
import { freePort, WHARF_BIN, REPO_ROOT } from "../support/process.ts";
import { isRoot, POSTGRES_URL, postgresReachable, requireCapability } from "../support/requirements.ts";

export const STEPS_PROJECT = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/steps");

const has = (bin: string) => {
  try {
    execFileSync("sh", ["-c", `command -v ${bin}`], { stdio: "ignore" });
    return true;
  } catch {
    return false; // not installed
  }
};

/** Root (replicas in their own PID namespaces), PostgreSQL, redis-server and haproxy, or a loud skip. */
export async function clusterAvailable(t: TestContext): Promise<boolean> {
  if (
    !requireCapability(
      t,
      isRoot(),
      "replica tests need root (each replica runs in its own PID namespace, as on separate machines)",
    )
  )
    return false;
  if (!requireCapability(t, await postgresReachable(), `PostgreSQL is not reachable at ${POSTGRES_URL}`)) return false;
  if (!requireCapability(t, has("redis-server"), "redis-server is not installed (scripts/setup-host.sh)")) return false;
  return requireCapability(t, has("haproxy"), "haproxy is not installed (scripts/setup-host.sh)");
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what: string | (() => string), ms: number, check: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (
      await check().catch((err) => {
        if ((err as { fatal?: boolean }).fatal) throw err;
        return false;
      })
    )
      return;
    if (Date.now() > deadline)
      throw new Error(`${typeof what === "function" ? what() : what} did not happen within ${ms} ms`);
    await sleep(50);
  }
}

function portOpen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = net.connect(port, "127.0.0.1");
    s.once("connect", () => (s.destroy(), resolve(true)));
    s.once("error", () => resolve(false));
  });
}

/** A redis-server of the test's own, on its own port, without persistence: a restart loses everything. */
export class TestRedis {
  private child: ChildProcess | null = null;
  constructor(readonly port: number) {}
  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }
  async start(): Promise<void> {
    this.child = spawn(
      "redis-server",
      [
        "--port",
        String(this.port),
        "--bind",
        "127.0.0.1",
        "--save",
        "",
        "--appendonly",
        "no",
        "--protected-mode",
        "no",
      ],
      { stdio: "ignore" },
    );
    await waitFor("redis start", 5000, () => portOpen(this.port));
  }
  async stop(): Promise<void> {
    const c = this.child;
    this.child = null;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once("exit", r));
    c.kill("SIGKILL");
    await exited;
  }
}

/** A database of the test's own on the local PostgreSQL, dropped at the end. */
export async function freshDatabase(t: Pick<TestContext, "after">): Promise<string> {
  const name = `wharf_scale_${crypto.randomBytes(5).toString("hex")}`;
  const admin = new pg.Client({ connectionString: POSTGRES_URL });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  t.after(async () => {
    const c = new pg.Client({ connectionString: POSTGRES_URL });
    await c.connect();
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
    await c.end();
  });
  const url = new URL(POSTGRES_URL);
  url.pathname = `/${name}`;
  return url.toString();
}

/** One replica: `wharf agent-server` in its own PID namespace, with its own home and the shared key. */
export class Replica {
  child: ChildProcess | null = null;
  private out = "";
  port = 0;
  constructor(
    readonly name: string,
    private readonly env: Record<string, string>,
    private readonly project = STEPS_PROJECT,
  ) {}
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }
  output(): string {
    return this.out;
  }
  async start(): Promise<void> {
    this.port ||= await freePort();
    this.out = "";
    const home = fs.mkdtempSync(path.join(os.tmpdir(), `wharf-replica-${this.name}-`));
    this.child = spawn(
      "unshare",
      [
        "--pid",
        "--fork",
        "--kill-child",
        process.execPath,
        WHARF_BIN,
        "agent-server",
        "--project",
        this.project,
        "--port",
        String(this.port),
        "--open",
        "--server-id",
        "scale",
      ],
      {
        cwd: REPO_ROOT,
        env: { ...process.env, WHARF_LOG_LEVEL: "warn", WHARF_HOME: home, ...this.env },
        stdio: ["ignore", "pipe", "pipe"],
      },
    );
    this.child.stdout!.on("data", (d) => (this.out += d));
    this.child.stderr!.on("data", (d) => (this.out += d));
    const child = this.child;
    await waitFor(`replica ${this.name} /ok`, 60_000, async () => {
      if (child.exitCode !== null)
        throw Object.assign(new Error(`replica ${this.name} exited (${child.exitCode}): ${this.out}`), { fatal: true });
      return (await fetch(`${this.url}/ok`)).ok;
    });
  }
  /** The replica's node process (PID 1 of its namespace, seen from here). */
  nodePid(): number {
    const kids = fs
      .readFileSync(`/proc/${this.child!.pid}/task/${this.child!.pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .map(Number);
    return kids[0];
  }
  /** Its PID namespace, as its worker ids name it (`<boot>~<ns>.<pid>.<id>`). */
  pidNamespace(): string {
    return String(fs.statSync(`/proc/${this.nodePid()}/ns/pid`).ino);
  }
  async signal(sig: NodeJS.Signals): Promise<void> {
    const c = this.child;
    if (!c || c.exitCode !== null) return;
    const exited = new Promise((r) => c.once("exit", r));
    process.kill(this.nodePid(), sig);
    await exited;
    this.child = null;
  }
  async stop(): Promise<void> {
    await this.signal("SIGKILL").catch(() => {});
  }
}

/** HAProxy in front of the replicas: active `/ok` checks, leastconn, no stickiness. */
export class Balancer {
  private child: ChildProcess | null = null;
  private dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-haproxy-"));
  port = 0;
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }
  async start(replicas: Replica[], opts: { waitAll?: boolean } = {}): Promise<void> {
    this.port = await freePort();
    const servers = replicas
      .map(
        (r) => `  server ${r.name} 127.0.0.1:${r.port} check inter 300 fall 2 rise 2 on-marked-down shutdown-sessions`,
      )
      .join("\n");
    const cfg = `global
  maxconn 2000
defaults
  mode http
  timeout connect 500ms
  timeout client 1h
  timeout server 1h
  retries 2
  option redispatch
  # A kept-alive server connection the replica closes just as a request goes out is retried, not a 502.
  retry-on conn-failure empty-response response-timeout
  timeout http-keep-alive 2s
  # A replica busy starting runs may take a moment to answer /ok: that is not down.
  timeout check 2s
frontend fe
  bind 127.0.0.1:${this.port}
  default_backend be
backend be
  balance leastconn
  option httpchk
  http-check send meth GET uri /ok
  # Which replica answered (tests pick a stream served by a replica that does not execute the run).
  http-response set-header x-served-by %s
${servers}
`;
    fs.writeFileSync(path.join(this.dir, "haproxy.cfg"), cfg);
    this.child = spawn("haproxy", ["-db", "-f", path.join(this.dir, "haproxy.cfg")], { stdio: "ignore" });
    await waitFor("haproxy", 5000, () => portOpen(this.port));
    if (opts.waitAll !== false)
      await waitFor("haproxy backends up", 5000, async () => (await fetch(`${this.url}/ok`)).ok);
  }
  async stop(): Promise<void> {
    const c = this.child;
    this.child = null;
    if (c && c.exitCode === null) {
      const exited = new Promise((r) => c.once("exit", r));
      c.kill("SIGKILL");
      await exited;
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

export interface Cluster {
  redis: TestRedis;
  replicas: Replica[];
  lb: Balancer;
  databaseUrl: string;
  /** The replica executing a run now (from its row's worker id), or undefined. */
  executing(runId: string): Promise<Replica | undefined>;
}

/** N replicas on a fresh database and a Redis of their own, behind HAProxy; all stopped after the test. */
export async function startCluster(
  t: Pick<TestContext, "after">,
  n: number,
  env: Record<string, string> = {},
  opts: { start?: number; project?: string; envOf?: (i: number) => Record<string, string> } = {},
): Promise<Cluster> {
  const databaseUrl = await freshDatabase(t);
  const redis = new TestRedis(await freePort());
  await redis.start();
  t.after(() => redis.stop());
  const shared = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: redis.url,
    WHARF_MASTER_KEY: crypto.randomBytes(32).toString("base64"),
    WHARF_RUN_LEASE_MS: "2000",
    ...env,
  };
  const replicas = Array.from(
    { length: n },
    (_, i) => new Replica(`r${i}`, { ...shared, ...opts.envOf?.(i) }, opts.project),
  );
  t.after(() => Promise.all(replicas.map((r) => r.stop())));
  // The first creates the schema; the others start together (`opts.start`: only that many now).
  const started = opts.start ?? n;
  for (const r of replicas) r.port = await freePort();
  await replicas[0].start();
  await Promise.all(replicas.slice(1, started).map((r) => r.start()));
  const lb = new Balancer();
  await lb.start(replicas, { waitAll: started === n });
  t.after(() => lb.stop());
  const db = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  db.on("error", () => {}); // the database is dropped with FORCE at the end
  t.after(() => db.end());
  return {
    redis,
    replicas,
    lb,
    databaseUrl,
    executing: async (runId) => {
      const r = await db.query<{ worker_id: string | null }>("select worker_id from agent_runs where run_id = $1", [
        runId,
      ]);
      const w = r.rows[0]?.worker_id;
      if (!w) return undefined;
      return replicas.find((rep) => rep.child && w.split(".")[0].endsWith(`~${rep.pidNamespace()}`));
    },
  };
}

export interface SseEvent {
  id?: string;
  event: string;
  data: string;
}

/**
 * Reads an SSE response into events, calling `onEvent` for each; resolves when the stream ends
 * (or rejects when it breaks). Comment lines (heartbeats) are counted.
 */
export async function readSse(
  res: Response,
  onEvent: (e: SseEvent) => void,
  stats?: { heartbeats: number },
): Promise<void> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  let cur: Partial<SseEvent> & { data?: string } = {};
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += decoder.decode(value, { stream: true });
    let i: number;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).replace(/\r$/, "");
      buf = buf.slice(i + 1);
      if (line === "") {
        if (cur.event !== undefined || cur.data !== undefined)
          onEvent({ id: cur.id, event: cur.event ?? "message", data: cur.data ?? "" });
        cur = {};
      } else if (line.startsWith(":")) {
        if (stats) stats.heartbeats++;
      } else {
        const c = line.indexOf(":");
        const field = c < 0 ? line : line.slice(0, c);
        const val = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
        if (field === "data") cur.data = cur.data === undefined ? val : `${cur.data}\n${val}`;
        else if (field === "id") cur.id = val;
        else if (field === "event") cur.event = val;
      }
    }
  }
}

/** Creates a thread run of `steps` through `baseUrl` (not streamed); answers its ids. */
export async function createStepsRun(
  baseUrl: string,
  input: { steps: number; delay: number },
  extra: Record<string, unknown> = {},
): Promise<{ threadId: string; runId: string }> {
  const created = await fetch(`${baseUrl}/threads`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: "{}",
  });
  if (!created.ok) throw new Error(`create thread: ${created.status} ${await created.text()}`);
  const th = (await created.json()) as { thread_id: string };
  const res = await fetch(`${baseUrl}/threads/${th.thread_id}/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({
      assistant_id: "steps",
      input,
      stream_mode: ["values", "updates"],
      config: { recursion_limit: 200 },
      ...extra,
    }),
  });
  if (!res.ok) throw new Error(`create run: ${res.status} ${await res.text()}`);
  const run = (await res.json()) as { run_id: string };
  return { threadId: th.thread_id, runId: run.run_id };
}

/** Follows a run's stream at `baseUrl` from `lastEventId` (-1: the start) to its end. */
export async function followRun(
  baseUrl: string,
  threadId: string,
  runId: string,
  lastEventId: string,
  onEvent: (e: SseEvent) => void,
  signal?: AbortSignal,
): Promise<void> {
  const res = await fetch(`${baseUrl}/threads/${threadId}/runs/${runId}/stream`, {
    headers: { "last-event-id": lastEventId },
    signal,
  });
  if (!res.ok) throw new Error(`stream: ${res.status}`);
  await readSse(res, onEvent);
}

/** A run that reached one of these stays there: waiting on for another status is pointless. */
const FINAL_STATUSES = ["success", "error", "interrupted", "timeout"];

/** Waits for a run's status to be one of `want`; fails at once (with the status) when it ended otherwise. */
export async function waitForStatus(
  baseUrl: string,
  threadId: string,
  runId: string,
  want: string[],
  ms: number,
): Promise<string> {
  let status = "";
  await waitFor(
    () => `run status ${want.join("/")} (last seen: ${status || "none"})`,
    ms,
    async () => {
      status = ((await (await fetch(`${baseUrl}/threads/${threadId}/runs/${runId}`)).json()) as { status: string })
        .status;
      if (!want.includes(status) && FINAL_STATUSES.includes(status))
        throw Object.assign(new Error(`run ended as ${status}, not ${want.join("/")}`), { fatal: true });
      return want.includes(status);
    },
  );
  return status;
}

/**
 * How late this process's timers fire while it runs (the machine's load, as every process on it
 * sees it): a bound on a wait between processes is the design's time plus this, not a guess.
 */
export function lagProbe(everyMs = 50): { maxMs(): number; stop(): void } {
  let max = 0;
  let last = performance.now();
  const timer = setInterval(() => {
    const now = performance.now();
    max = Math.max(max, now - last - everyMs);
    last = now;
  }, everyMs);
  timer.unref();
  return { maxMs: () => Math.round(max), stop: () => clearInterval(timer) };
}
