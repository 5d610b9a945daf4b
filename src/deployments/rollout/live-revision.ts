import type { AgentProcess } from "../runtime/agent-process.ts";
import type { LocalServer } from "./sole-server.ts";
import type { RevisionLog } from "../store/revision-logs.ts";

/**
 * A revision whose agent server runs in this platform process: the process, whether it is ready,
 * and how many proxied requests are in flight on it (a revision being replaced stops only once
 * they have finished).
 */
export class LiveRevision {
  inflight = 0;
  draining = false;
  restarts = 0;
  nextRestartAt = 0;
  private readyResolve!: () => void;
  private readyReject!: (err: Error) => void;
  readonly ready: Promise<void>;
  isReady = false;
  private idleWaiters: Array<() => void> = [];

  constructor(
    readonly deploymentId: string,
    readonly revisionId: string,
    public proc: AgentProcess,
    readonly log: RevisionLog,
    /** Its place among this process's servers of the deployment (see LocalServers). */
    readonly here: Pick<LocalServer, "up">,
  ) {
    this.ready = new Promise<void>((resolve, reject) => {
      this.readyResolve = resolve;
      this.readyReject = reject;
    });
    this.ready.catch(() => {
      // A server that never came up rejects `ready` whether or not a request waits on it: the
      // waiting requests see the rejection; without any, it must not count as unhandled.
    });
  }

  markReady(): void {
    this.isReady = true;
    this.readyResolve();
  }

  markFailed(err: Error): void {
    this.readyReject(err);
  }

  get url(): string {
    return this.proc.url;
  }

  begin(): void {
    this.inflight++;
  }

  end(): void {
    this.inflight--;
    if (this.inflight <= 0) {
      this.inflight = 0;
      for (const w of this.idleWaiters.splice(0)) w();
    }
  }

  /** Resolves once no request is in flight, or after `timeoutMs` (true if it drained). */
  drained(timeoutMs: number): Promise<boolean> {
    if (this.inflight === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => resolve(false), timeoutMs);
      t.unref();
      this.idleWaiters.push(() => {
        clearTimeout(t);
        resolve(true);
      });
    });
  }
}
