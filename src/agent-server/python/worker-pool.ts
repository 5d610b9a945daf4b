import type { Frame } from "./frames.ts";
import { PythonWorker, type WorkerHello, type WorkerOptions } from "./worker.ts";

/** The worker a new run goes to (pure: table-tested): the least busy of those up, the earliest on ties; null when none is up. */
export function pickWorker(workers: ReadonlyArray<{ up: boolean; runs: number }>): number | null {
  let best: number | null = null;
  workers.forEach((w, i) => {
    if (w.up && (best === null || w.runs < workers[best].runs)) best = i;
  });
  return best;
}

/**
 * A project's Python workers (`WHARF_PYTHON_WORKERS`, default one): the same graphs in each, over
 * one checkpoint store. A run goes to the least busy worker and is cancelled there; everything else
 * (state, auth, schemas) to whichever is least busy. Each worker crashes and restarts on its own,
 * so a graph that blocks its event loop (`time.sleep` in an `async` node, CPU-bound code) delays
 * only the runs of its own worker.
 */
export class PythonWorkers {
  readonly workers: PythonWorker[];
  /** Which worker runs which run (or http.app request), for `run.cancel`. */
  private readonly owners = new Map<string, PythonWorker>();

  constructor(options: WorkerOptions, size = 1) {
    this.workers = Array.from({ length: Math.max(1, size) }, (_, i) => new PythonWorker({ ...options, label: size > 1 ? `${i + 1}/${size}` : undefined }));
  }

  /** The graphs and auth the workers loaded (the same project in each). */
  get hello(): WorkerHello | null {
    return this.workers.find((w) => w.up)?.hello ?? this.workers.find((w) => w.hello)?.hello ?? null;
  }

  /** Whether runs can be served now (one worker up is enough). */
  get up(): boolean {
    return this.workers.some((w) => w.up);
  }

  /** Starts every worker; resolves with the first's hello, fails when any fails to start. */
  async start(): Promise<WorkerHello> {
    const hellos = await Promise.all(this.workers.map((w) => w.start()));
    return hellos[0];
  }

  /** Resolves once a worker is up. */
  ready(): Promise<WorkerHello> {
    return Promise.any(this.workers.map((w) => w.ready()));
  }

  private pick(): PythonWorker {
    const i = pickWorker(this.workers);
    // None up: the first waits for its restart in `request`.
    return this.workers[i ?? 0];
  }

  async request(op: string, payload: unknown, onEvent?: (event: string, body: Buffer) => void): Promise<Frame> {
    const runId = (payload as { run_id?: string } | null)?.run_id;
    if ((op === "run.cancel" || op === "run.drain") && runId) {
      const owner = this.owners.get(runId);
      if (owner) return owner.request(op, payload);
    }
    const worker = this.pick();
    // Runs and http.app requests are cancelled on the worker that has them.
    if ((op !== "run.start" && op !== "http.request") || !runId) return worker.request(op, payload, onEvent);
    this.owners.set(runId, worker);
    try {
      return await worker.request(op, payload, onEvent);
    } finally {
      if (this.owners.get(runId) === worker) this.owners.delete(runId);
    }
  }

  async call<T = unknown>(op: string, payload: unknown): Promise<T> {
    const f = await this.request(op, payload);
    return JSON.parse(f.body.toString("utf8")) as T;
  }

  /** Serves an operation the workers call (`store.batch`, `store.embed`). */
  serve(op: string, handler: (payload: unknown) => Promise<unknown>): void {
    for (const w of this.workers) w.serve(op, handler);
  }

  async stop(graceMs?: number): Promise<void> {
    await Promise.all(this.workers.map((w) => w.stop(graceMs)));
  }
}
