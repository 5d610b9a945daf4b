/**
 * Whether a revision's agent server about to start will be the only server of its deployment's
 * storage (threads and runs are scoped by the deployment id, shared by all its revisions). Only
 * then may it start `--exclusive`: settle at once every run still marked running, whose process
 * must be dead. If another revision of the deployment still runs (the one being replaced, draining,
 * here or in another platform process), its runs are alive and must be left alone; they are then
 * settled the slow way, when their lease expires.
 */

/** Another revision of the same deployment, as this process and the database know it. */
export interface OtherRevision {
  /** Its server runs in this platform process (draining included). */
  runningHere: boolean;
  /** Which platform process owns it, per the database (null: none). */
  owner: string | null;
  /** That owner's lease on it (ISO time), renewed while it serves or deploys. */
  leaseUntil: string | null;
  /** The owner recorded a server process for it. */
  hasServer: boolean;
}

export function soleServer(others: OtherRevision[], me: string, nowIso: string, gone: readonly string[] = []): boolean {
  return !others.some((o) => {
    if (o.runningHere) return true;
    // Ours but not running here: whatever of it ran died with our previous process; likewise for
    // a process seen gone (its session ended) before its lease ran out.
    if (!o.owner || o.owner === me || !o.hasServer || gone.includes(o.owner)) return false;
    // Another process's server counts while that process keeps its lease; a process that stopped
    // renewing it is dead, and its confined servers died with it.
    return o.leaseUntil !== null && o.leaseUntil > nowIso;
  });
}

/**
 * One agent server this platform process starts or runs, from before its start decides
 * `--exclusive` until it exits (a rollout's server during its health checks, a revision served
 * again, a replaced one draining: all count).
 */
export interface LocalServer {
  readonly deploymentId: string;
  readonly revisionId: string;
  /**
   * This start's turn: every start of the same deployment registered here before it has answered
   * `/ok` (an exclusive start has settled the abandoned runs by then), failed, or exited; false
   * when it stopped waiting for them after the longest wait (it then starts beside them, not
   * exclusive: they still count).
   */
  turn(signal?: AbortSignal): Promise<boolean>;
  /** The deployment's servers here that this start decides against: those registered before it, still running. */
  others(): OtherRevision[];
  /** It answered `/ok`, or will not: the next start of the deployment may go. */
  up(): void;
  /** It exited, or never started. */
  end(): void;
}

interface Entry {
  deploymentId: string;
  up: Promise<void>;
}

/**
 * The agent servers of this platform process, by deployment. Starts of one deployment take turns,
 * so each sees the ones before it: without turns, a revision served again after a restart and an
 * interrupted rollout resuming beside it both found no other server, both started `--exclusive`,
 * and both settled the same abandoned runs at once in the deployment's SQLite database, where one
 * of them waited past its lock timeout and exited (the rollout then ended DEPLOY_FAILED). A start
 * registered after another one waits for it, so it never runs while the earlier one decides.
 */
export class LocalServers {
  private readonly entries = new Set<Entry>();

  /**
   * @param maxWaitMs the longest a start waits for the ones before it: a start that hangs (a
   * broken revision that never answers) must not keep the active revision from being served
   * again after a restart for a whole deploy deadline.
   */
  constructor(private readonly maxWaitMs = 30_000) {}

  begin(deploymentId: string, revisionId: string): LocalServer {
    const before = [...this.entries].filter((e) => e.deploymentId === deploymentId);
    let resolveUp!: () => void;
    const entry: Entry = { deploymentId, up: new Promise<void>((r) => (resolveUp = r)) };
    this.entries.add(entry);
    return {
      deploymentId,
      revisionId,
      turn: (signal) => waitAtMost(Promise.all(before.map((e) => e.up)), this.maxWaitMs, signal),
      others: () =>
        before
          .filter((e) => this.entries.has(e))
          .map(() => ({ runningHere: true, owner: null, leaseUntil: null, hasServer: true })),
      up: () => resolveUp(),
      end: () => {
        this.entries.delete(entry);
        resolveUp();
      },
    };
  }

  /** Servers of the deployment running or starting here. */
  count(deploymentId: string): number {
    return [...this.entries].filter((e) => e.deploymentId === deploymentId).length;
  }
}

/** True once `p` resolved, false after `ms` without; rejects when `signal` aborts first. */
function waitAtMost(p: Promise<unknown>, ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
    };
    const timer = setTimeout(() => (done(), resolve(false)), ms);
    const onAbort = () => (done(), reject(signal!.reason));
    signal?.addEventListener("abort", onAbort, { once: true });
    p.then(
      () => (done(), resolve(true)),
      (err: unknown) => (done(), reject(err)),
    );
  });
}
