import { StreamGapError, type RunEventBus, type RunStreamWriter, type ThreadEventStore } from "../../cluster/index.ts";
import type { Logger } from "../../log/logger.ts";
import type { RunEvent } from "./run-channel.ts";
import type { ActiveRun } from "./run-types.ts";

/** How long an ended run's stream stays in Redis: resumable runs for the rejoin window, others for late joiners. */
export const RESUMABLE_KEEP_SECONDS = 600;
export const ENDED_KEEP_SECONDS = 60;

/** An event read from Redis (already serialised by the executing replica). */
class RemoteEvent implements RunEvent {
  constructor(
    readonly id: number,
    readonly event: string,
    readonly json: string,
  ) {}
}

/**
 * The replica side of the run engine: mirrors the runs executing here into Redis (fenced by their
 * attempt) and follows runs executing elsewhere from it. Without Redis (one process) it does
 * nothing and the engine serves its own memory only.
 */
export class RunStreams {
  private readonly writers = new Map<string, RunStreamWriter>();

  constructor(
    private readonly bus: RunEventBus | null,
    private readonly log: Logger,
  ) {}

  get enabled(): boolean {
    return this.bus !== null;
  }

  /** The threads' protocol logs in Redis (the event-based protocol on any replica); null in one process. */
  get threadEvents(): ThreadEventStore | null {
    return this.bus?.threadEvents ?? null;
  }

  /**
   * Mirrors an attempt that starts here. A first attempt numbers from 0 and starts at once (its
   * writer takes the fence with its first append); a later one first takes the fence and learns
   * where the stream stops, and numbers its events from there.
   */
  async attach(active: ActiveRun, attempt: number, onFenced: () => void): Promise<void> {
    const bus = this.bus;
    if (!bus) return;
    const runId = active.run.run_id;
    if (attempt > 1) {
      let top: number | null = 0;
      for (let i = 0; ; i++) {
        try {
          top = await bus.claim(runId, attempt);
          break;
        } catch (err) {
          // Redis down: numbering unknown; wait a little, then start from 0 (followers see a gap and an error).
          if (i >= 20) {
            this.log.warn(
              { err: (err as Error).message, runId },
              "cannot take the run's stream in redis; its followers lose the earlier attempt's events",
            );
            break;
          }
          await new Promise((r) => setTimeout(r, 250));
        }
      }
      if (top === null) {
        onFenced();
        return;
      }
      active.channel.base = top;
    }
    const writer = bus.writer(runId, attempt, active.channel, onFenced);
    this.writers.set(runId, writer);
    active.channel.onPush = () => writer.notify();
    writer.notify();
  }

  /** The run ended: the end marker follows its last event. */
  ended(runId: string, resumable: boolean): void {
    const w = this.writers.get(runId);
    if (!w) return;
    this.writers.delete(runId);
    w.close("end", resumable ? RESUMABLE_KEEP_SECONDS : ENDED_KEEP_SECONDS);
    this.draining.add(w);
    void w.drained(10_000).then(() => this.draining.delete(w));
  }

  /** The attempt stopped without ending the run (drained): its events go, the next attempt continues the stream. */
  handedBack(runId: string): void {
    const w = this.writers.get(runId);
    if (!w) return;
    this.writers.delete(runId);
    w.handBack();
    this.draining.add(w);
    void w.drained(10_000).then(() => this.draining.delete(w));
  }

  private readonly draining = new Set<RunStreamWriter>();

  /** Waits (at most `ms`) for the events of runs that ended here to reach Redis. */
  async flushed(ms: number): Promise<void> {
    await Promise.all([...this.draining, ...this.writers.values()].map((w) => w.drained(ms)));
  }

  /** Records a thread run's start for the thread streams of every replica. */
  threadRunStarted(threadId: string, runId: string): void {
    void this.bus
      ?.threadRunStarted(threadId, runId)
      .catch((err) =>
        this.log.warn({ err: (err as Error).message, threadId }, "cannot record a thread run's start in redis"),
      );
  }

  /**
   * A run's events after `after` from Redis, until it ends. When Redis lost them or stays
   * unreachable the follow ends with an `error` event: a clean end, after which a client falls back
   * to `join` and the thread's state (the run itself is in PostgreSQL, not lost).
   */
  async *follow(
    runId: string,
    after: number,
    signal: AbortSignal,
    isOver: () => Promise<boolean>,
  ): AsyncGenerator<RunEvent> {
    if (!this.bus) return;
    let last = after;
    try {
      for await (const e of this.bus.followRun(runId, after, signal, isOver)) {
        last = e.n;
        yield new RemoteEvent(e.n, e.event, e.json);
      }
    } catch (err) {
      const message =
        err instanceof StreamGapError
          ? err.message
          : `the run's event stream is unavailable: ${(err as Error).message}`;
      this.log.warn({ runId, after: last, err: message }, "run stream follow ended early");
      yield new RemoteEvent(last, "error", JSON.stringify({ error: "StreamUnavailable", message }));
    }
  }

  /** Calls `onRun` for each run of the thread that starts on any replica from now on. */
  async watchThread(threadId: string, signal: AbortSignal, onRun: (runId: string) => void): Promise<void> {
    await this.bus?.watchThreadRuns(threadId, signal, onRun);
  }

  async close(): Promise<void> {
    await this.flushed(3000);
    await this.bus?.close();
  }
}
