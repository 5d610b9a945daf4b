import type { AgentServerContext } from "../context.ts";
import type { RunEvent } from "./run-channel.ts";
import type { RunStreams } from "./run-streams.ts";
import type { ActiveRun } from "./run-types.ts";
import { INFLIGHT } from "./runs.ts";

/** What following runs needs of the run engine. */
export interface FollowersHost {
  readonly ctx: AgentServerContext;
  readonly streams: RunStreams;
  readonly stopSignal: AbortSignal;
  isStopping(): boolean;
  /** The run executing in this process. */
  active(runId: string): ActiveRun | undefined;
  isActive(runId: string): boolean;
  /** An ended run's channel, if still kept. */
  endedChannel(runId: string): ActiveRun | undefined;
}

/** Waiting for runs to start and end, and following their events (here, or on replicas through Redis). */
export class RunFollowers {
  private readonly startWaiters = new Map<string, Array<(a: ActiveRun | null) => void>>();
  constructor(private readonly host: FollowersHost) {}

  notifyStart(runId: string, active: ActiveRun | null): void {
    const waiters = this.startWaiters.get(runId);
    if (!waiters) return;
    this.startWaiters.delete(runId);
    for (const w of waiters) w(active);
  }

  /**
   * The executing run, waiting while it is queued. Resolves null when the run is over (or was
   * cancelled before it started). A run started by another process is noticed by re-reading its row.
   */
  async whenStarted(runId: string, signal?: AbortSignal): Promise<ActiveRun | null> {
    for (;;) {
      const local = this.host.active(runId);
      if (local) return local;
      // Told of a start from before the row is read: a run that starts here (and maybe ends)
      // while the read is under way was read as queued, and its start would reach nobody.
      const start = this.nextStart(runId);
      const row = await this.host.ctx.db
        .selectFrom("agent_runs")
        .select(["status"])
        .where("run_id", "=", runId)
        .executeTakeFirst();
      if (!row || row.status !== "pending") {
        start.forget();
        return this.host.active(runId) ?? start.told ?? null;
      }
      if (signal?.aborted) {
        start.forget();
        return start.told ?? null;
      }
      let onAbort: (() => void) | null = null;
      const started = await new Promise<ActiveRun | null | "recheck">((resolve) => {
        start.promise.then(resolve, () => resolve("recheck"));
        setTimeout(() => resolve("recheck"), 1000).unref();
        onAbort = () => resolve(null);
        signal?.addEventListener("abort", onAbort, { once: true });
      });
      if (onAbort) signal?.removeEventListener("abort", onAbort);
      if (started !== "recheck") return started;
      start.forget();
    }
  }

  /** The run's next start (or cancel before it) as told by `notifyStart`; `forget` stops listening. */
  private nextStart(runId: string): {
    promise: Promise<ActiveRun | null>;
    told: ActiveRun | null | undefined;
    forget: () => void;
  } {
    let waiter!: (a: ActiveRun | null) => void;
    const out = {
      told: undefined as ActiveRun | null | undefined,
      promise: new Promise<ActiveRun | null>((resolve) => {
        waiter = (a) => {
          out.told = a;
          resolve(a);
        };
      }),
      forget: () => {
        const list = this.startWaiters.get(runId);
        const i = list?.indexOf(waiter) ?? -1;
        if (i < 0) return;
        list!.splice(i, 1);
        if (list!.length === 0) this.startWaiters.delete(runId);
      },
    };
    const list = this.startWaiters.get(runId) ?? [];
    list.push(waiter);
    this.startWaiters.set(runId, list);
    return out;
  }

  /**
   * Resolves when a run has ended: at once through this process's channel when it executes here;
   * a run executing in another process is followed through its row.
   */
  async waitForEnd(runId: string): Promise<ActiveRun | null> {
    const { streams } = this.host;
    for (;;) {
      const active = streams.enabled ? this.host.active(runId) : await this.whenStarted(runId);
      if (active) {
        await active.done;
        return active;
      }
      if (!(await this.inflight(runId))) return null;
      if (streams.enabled) {
        // Executing elsewhere (or queued): its stream's end marker says when it is over.
        let failed = false;
        for await (const ev of streams.follow(runId, -1, this.host.stopSignal, () => this.isOver(runId)))
          if (ev.event === "error" && /StreamUnavailable/.test(ev.json)) failed = true;
        if (!failed && !this.host.isStopping()) continue;
      }
      if (this.host.isStopping()) return null;
      await new Promise((r) => setTimeout(r, 200));
    }
  }

  private async inflight(runId: string): Promise<boolean> {
    const row = await this.host.ctx.db
      .selectFrom("agent_runs")
      .select(["status"])
      .where("run_id", "=", runId)
      .executeTakeFirst();
    return !!row && INFLIGHT.includes(row.status as never);
  }

  private async isOver(runId: string): Promise<boolean> {
    return !this.host.isActive(runId) && !(await this.inflight(runId));
  }

  /**
   * A run's events after `after` (-1: all), until it ends or `signal` aborts: from this process's
   * memory when it executes here (the fast path), else, on replicas, from Redis. Null when there is
   * nothing to follow (the run is over and `replay` was not asked for, or its events are gone).
   */
  async follow(
    runId: string,
    after: number,
    signal: AbortSignal,
    replay: boolean,
  ): Promise<AsyncGenerator<RunEvent> | null> {
    const { streams } = this.host;
    if (!streams.enabled) {
      const active = (await this.whenStarted(runId, signal)) ?? (replay ? this.host.endedChannel(runId) : undefined);
      return active ? active.channel.follow(after, signal) : null;
    }
    const local = this.host.active(runId) ?? (replay ? this.host.endedChannel(runId) : undefined);
    if (local && local.channel.covers(after)) return local.channel.follow(after, signal);
    if (!replay && !(await this.inflight(runId)) && !this.host.isActive(runId)) return null;
    return streams.follow(runId, after, signal, () => this.isOver(runId));
  }
}
