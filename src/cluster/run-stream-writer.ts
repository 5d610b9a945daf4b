import type { Logger } from "../log/logger.ts";
import { IdleWaiters } from "./idle-waiters.ts";
import { RedisRetry } from "./redis-retry.ts";
import { runAttemptKey, runStreamKey } from "./stream-ids.ts";

/** What the writer mirrors: the executing attempt's events, numbered from `base`. */
export interface WriterSource {
  readonly base: number;
  readonly events: ReadonlyArray<{ readonly event: string; readonly json: string }>;
}

export interface WriterOptions {
  attempt: number;
  /** Approximate cap of the stream's length (`MAXLEN ~`). */
  maxLen: number;
  /** Expiry while the run executes (refreshed by every append). */
  liveTtlSeconds: number;
  /** Called once when a later attempt owns the stream: this attempt lost its lease. */
  onFenced(): void;
  /** The script runner (EVALSHA with its fallback). */
  append(keys: string[], args: Array<string | number>): Promise<number>;
}

const BATCH = 500;

/**
 * Mirrors one executing attempt's events into its run's stream, in pipelined batches (one script
 * call in flight; what arrives meanwhile goes in the next). Nothing is dropped while the process
 * lives: a failed batch is retried from the same place, a Redis that lost its data (attempt key
 * gone) is refilled from this attempt's first event, and the end marker goes last.
 */
export class RunStreamWriter {
  private sent = 0;
  private end: { status: string; ttlSeconds: number } | null = null;
  private finished = false;
  private flushing = false;
  private scheduled = false;
  private fenced = false;
  private readonly retry = new RedisRetry();
  private readonly idleWaiters = new IdleWaiters();

  constructor(
    private readonly runId: string,
    private readonly source: WriterSource,
    private readonly options: WriterOptions,
    private readonly log: Logger,
  ) {}

  /** New events were pushed: flush soon (one batch per turn of the event loop). */
  notify(): void {
    if (this.scheduled || this.flushing || this.fenced || this.retry.pending) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      void this.flush();
    });
  }

  /** The run ended: its end marker follows the last event; the stream then expires after `ttlSeconds`. */
  close(status: string, ttlSeconds: number): void {
    this.end = { status, ttlSeconds };
    this.notify();
  }

  /** The attempt stops without ending the run (drained, handed back): the events go, no end marker. */
  handBack(): void {
    this.finished = true;
    this.notify();
  }

  /** Resolves when everything pushed so far (and the end marker, if any) is in Redis, or after `ms`. */
  async drained(ms: number): Promise<void> {
    if (this.idle()) return;
    await this.idleWaiters.wait(ms);
  }

  private idle(): boolean {
    return this.fenced || (this.sent >= this.source.events.length && (this.end === null || this.finished));
  }

  private async flush(): Promise<void> {
    if (this.flushing || this.fenced) return;
    this.flushing = true;
    try {
      while (!this.fenced && !this.idle()) {
        const from = this.sent;
        const to = Math.min(this.source.events.length, from + BATCH);
        const args: Array<string | number> = [this.options.attempt, this.options.maxLen, this.options.liveTtlSeconds];
        for (let i = from; i < to; i++) {
          const ev = this.source.events[i];
          args.push(this.source.base + i + 1, "ev", ev.event, ev.json);
        }
        const withEnd = this.end !== null && to === this.source.events.length;
        if (withEnd) {
          args.push(this.source.base + to + 1, "end", this.end!.status, "");
          args[2] = this.end!.ttlSeconds;
        }
        const added = await this.options.append([runStreamKey(this.runId), runAttemptKey(this.runId)], args);
        if (added === -1) {
          this.fenced = true;
          this.log.warn(
            { runId: this.runId, attempt: this.options.attempt },
            "a later attempt owns this run's stream: this attempt's events are refused",
          );
          this.options.onFenced();
        } else if (added === -2) {
          // Redis lost the stream (restarted without its data): refill it from this attempt's start.
          this.sent = 0;
        } else {
          this.sent = to;
          if (withEnd) this.finished = true;
        }
      }
    } catch (err) {
      this.log.warn({ err, runId: this.runId }, "cannot write run events to redis; retrying");
      this.retry.schedule(() => void this.flush());
    } finally {
      this.flushing = false;
    }
    if (this.idle()) this.idleWaiters.release();
  }
}
