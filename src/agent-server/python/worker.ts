import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import type { Readable, Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { Logger } from "../../log/logger.ts";
import { encodeFrame, FrameDecoder, type Frame } from "./frames.ts";
import { restartDelayMs } from "./restart-policy.ts";
import { hostVariable, processEnvironment } from "../../config/index.ts";

/** Where the `wharf_worker` package lives (shipped beside `src/`). */
export const WORKER_PACKAGE_DIR = fileURLToPath(new URL("../../../python", import.meta.url));

export interface WorkerOptions {
  /** The interpreter of the project's virtual environment. */
  python: string;
  projectDir: string;
  /** Graph id → reference as written in `langgraph.json`. */
  graphs: Record<string, string>;
  /** `auth.path` when it is a Python `langgraph_sdk.Auth`. */
  auth: string | null;
  /** `store.index.embed` when Python computes embeddings (a function reference or a provider string). */
  embed?: string | null;
  /** `http.app` when it is a Python ASGI app. */
  httpApp?: string | null;
  /** Where the worker checkpoints (see `python/wharf_worker/checkpointer.py`). */
  checkpointer: CheckpointerSpec;
  /** Names this worker in logs when the project has several. */
  label?: string;
  log: Logger;
}

/**
 * The Python saver: the server's PostgreSQL (its schema) or a SQLite file of its own (never the JS
 * saver's file: both create `checkpoints`); `path_ref` is `checkpointer.path`, `serde` `checkpointer.serde`.
 */
export interface CheckpointerSpec {
  kind: "postgres" | "sqlite";
  url?: string;
  schema?: string;
  path?: string;
  path_ref?: string | null;
  serde?: Record<string, unknown> | null;
}

export interface WorkerHello {
  graphs: Record<string, { name: string }>;
  errors: Record<string, { module: string; error: string }>;
  /** The project's Python `Auth`: whether it authenticates, the parameters it asks for, its handler keys (`threads:create`, `threads:*`, `*:*`). */
  auth: { authenticate: boolean; params: string[]; handlers: string[]; where: string } | null;
  auth_error: string | null;
  /** Why `store.index.embed` did not load, or null. */
  embed_error?: string | null;
  /** Why `http.app` did not load, or null. */
  http_error?: string | null;
  versions: Record<string, string | null>;
}

/** The worker ended while the request was in flight (crash, kill, OOM): only its requests fail. */
export class WorkerCrashed extends Error {}

/** The worker answered with an error (the graph's, or a refused request with its HTTP status). */
export class WorkerRequestError extends Error {
  constructor(
    readonly errorName: string,
    message: string,
    readonly status: number | null,
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = errorName;
  }
}

interface Pending {
  resolve(frame: Frame): void;
  reject(err: Error): void;
  onEvent?: (event: string, body: Buffer) => void;
}

/**
 * The project's long-lived Python process. Requests carry ids and run concurrently there; a crash
 * fails only the requests in flight, and the worker is started again with backoff (`/ok` reports it
 * down meanwhile).
 */
export class PythonWorker {
  private child: ChildProcess | null = null;
  private input: Writable | null = null;
  private pending = new Map<number, Pending>();
  private nextId = 1;
  private stopping = false;
  private crashes = 0;
  private readyPromise!: Promise<WorkerHello>;
  private resolveReady!: (h: WorkerHello) => void;
  private rejectReady!: (e: Error) => void;
  private stderrTail: string[] = [];
  /** Calls the worker makes to the server (the store), by operation. */
  private readonly services = new Map<string, (payload: unknown) => Promise<unknown>>();
  /** The last hello (graph names and load errors), set once the first worker is up. */
  hello: WorkerHello | null = null;
  up = false;
  /** Runs in flight here: what the pool spreads runs by. */
  runs = 0;

  constructor(private readonly options: WorkerOptions) {
    this.resetReady();
  }

  private resetReady(): void {
    this.readyPromise = new Promise((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    // A start nobody awaits yet must not be an unhandled rejection.
    this.readyPromise.catch(() => {
      // Observed here so a failed start is not an unhandled rejection; callers await it and see it.
    });
  }

  /** Starts the worker and resolves with its hello (graphs loaded, errors per graph). */
  start(): Promise<WorkerHello> {
    const o = this.options;
    const child = spawn(o.python, ["-m", "wharf_worker"], {
      cwd: o.projectDir,
      stdio: ["ignore", "pipe", "pipe", "pipe", "pipe"],
      // The worker runs the project's graphs with the server's own environment (the project's `env`,
      // its secrets, proxy variables), as a JavaScript graph in this process sees it: passed on, not
      // read as configuration.
      env: {
        ...processEnvironment(),
        PYTHONPATH: [WORKER_PACKAGE_DIR, hostVariable("PYTHONPATH")].filter(Boolean).join(path.delimiter),
        PYTHONUNBUFFERED: "1",
        WHARF_WORKER_CONFIG: JSON.stringify({ project_dir: o.projectDir, graphs: o.graphs, auth: o.auth, embed: o.embed ?? null, http_app: o.httpApp ?? null, checkpointer: o.checkpointer }),
      },
    });
    this.child = child;
    this.input = child.stdio[3] as Writable;
    this.input.on("error", () => {
      // EPIPE after a crash: the exit handler fails the requests.
    });
    const decoder = new FrameDecoder();
    (child.stdio[4] as Readable).on("data", (chunk: Buffer) => {
      try {
        for (const f of decoder.push(chunk)) this.onFrame(f);
      } catch (err) {
        o.log.error({ err }, "python worker sent a malformed frame; restarting it");
        child.kill("SIGKILL");
      }
    });
    const logLines = (stream: Readable, level: "info" | "warn") => {
      let rest = "";
      stream.on("data", (c: Buffer) => {
        const lines = (rest + c.toString("utf8")).split("\n");
        rest = lines.pop()!;
        for (const line of lines) {
          if (level === "warn") this.stderrTail = [...this.stderrTail.slice(-19), line];
          o.log[level]({ source: "python", ...(o.label ? { worker: o.label } : {}) }, line);
        }
      });
    };
    logLines(child.stdout!, "info");
    logLines(child.stderr!, "warn");
    child.on("error", (err) => this.onExit(null, null, err));
    child.on("exit", (code, signal) => this.onExit(code, signal));
    return this.readyPromise;
  }

  /** The running process's id (tests and diagnostics), or null while none runs. */
  get pid(): number | null {
    return this.child?.pid ?? null;
  }

  /** Resolves once a worker is up (after a crash, once it is back). */
  ready(): Promise<WorkerHello> {
    return this.readyPromise;
  }

  private onFrame(f: Frame): void {
    const h = f.header;
    if (h.kind === "hello") {
      const hello = JSON.parse(f.body.toString("utf8")) as WorkerHello;
      this.hello = hello;
      this.up = true;
      this.crashes = 0;
      this.resolveReady(hello);
      return;
    }
    if (h.kind === "call") {
      void this.answer(h.id as string, h.op as string, f.body);
      return;
    }
    const p = this.pending.get(h.id as number);
    if (!p) return;
    if (h.kind === "event") {
      p.onEvent?.(h.event as string, f.body);
      return;
    }
    this.pending.delete(h.id as number);
    if (h.kind === "result") p.resolve(f);
    else if (h.kind === "cancelled") p.reject(new WorkerRequestError("CancelledError", "cancelled", null));
    else p.reject(new WorkerRequestError(String(h.error ?? "Error"), String(h.message ?? ""), typeof h.status === "number" ? h.status : null, (h.headers as Record<string, string> | undefined) ?? {}));
  }

  private onExit(code: number | null, signal: NodeJS.Signals | null, err?: Error): void {
    if (!this.child) return;
    this.child = null;
    this.input = null;
    const wasUp = this.up;
    this.up = false;
    const why = err ? err.message : signal ? `signal ${signal}` : `exit code ${code}`;
    const crash = new WorkerCrashed(`the Python worker ended (${why})`, err ? { cause: err } : undefined);
    for (const p of this.pending.values()) p.reject(crash);
    this.pending.clear();
    if (this.stopping) return;
    const tail = this.stderrTail.join("\n");
    this.options.log.error({ code, signal, stderr: tail }, `python worker ended (${why}); restarting it`);
    if (!wasUp) this.rejectReady(new WorkerCrashed(`the Python worker did not start (${why}):\n${tail}`));
    this.resetReady();
    const delay = restartDelayMs(this.crashes++);
    setTimeout(() => {
      if (!this.stopping) void this.start();
    }, delay).unref();
  }

  /** Serves an operation the worker calls (`store.batch`). */
  serve(op: string, handler: (payload: unknown) => Promise<unknown>): void {
    this.services.set(op, handler);
  }

  private async answer(id: string, op: string, body: Buffer): Promise<void> {
    let reply: Buffer;
    try {
      const handler = this.services.get(op);
      if (!handler) throw new Error(`the agent server does not serve ${op}`);
      const result = await handler(JSON.parse(body.toString("utf8")));
      reply = encodeFrame({ id, kind: "reply" }, JSON.stringify(result ?? null));
    } catch (err) {
      reply = encodeFrame({ id, kind: "reply_error", message: (err as Error).message });
    }
    this.input?.write(reply);
  }

  /** One request; resolves with the result frame. */
  async request(op: string, payload: unknown, onEvent?: (event: string, body: Buffer) => void): Promise<Frame> {
    const isRun = op === "run.start";
    if (isRun) this.runs++;
    try {
      if (!this.up) await this.readyPromise;
      const id = this.nextId++;
      return await new Promise<Frame>((resolve, reject) => {
        if (!this.input) return reject(new WorkerCrashed("the Python worker is not running"));
        this.pending.set(id, { resolve, reject, onEvent });
        this.input.write(encodeFrame({ id, op }, JSON.stringify(payload ?? null)));
      });
    } finally {
      if (isRun) this.runs--;
    }
  }

  /** A request whose result body is parsed. */
  async call<T = unknown>(op: string, payload: unknown): Promise<T> {
    const f = await this.request(op, payload);
    return JSON.parse(f.body.toString("utf8")) as T;
  }

  /** Closes the worker's input (it cancels what runs and exits), then SIGTERM, then SIGKILL. */
  async stop(graceMs = 5000): Promise<void> {
    this.stopping = true;
    const child = this.child;
    if (!child) return;
    const exited = new Promise<void>((r) => child.once("exit", () => r()));
    this.input?.end();
    const term = setTimeout(() => child.kill("SIGTERM"), graceMs / 2);
    const kill = setTimeout(() => child.kill("SIGKILL"), graceMs);
    await exited;
    clearTimeout(term);
    clearTimeout(kill);
  }
}
