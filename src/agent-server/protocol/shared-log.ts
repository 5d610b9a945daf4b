import crypto from "node:crypto";
import { IdleWaiters, RedisRetry, type ThreadEventItem, type ThreadEventStore } from "../../cluster/index.ts";
import type { Logger } from "../../log/logger.ts";
import type { LogOrigin, LogSink, ShareLog, ThreadLog } from "./thread-log.ts";

const BATCH = 500;

/** The attempt of a run whose pump writes: its appends are fenced like the run's own events. */
export interface PumpIdentity {
  runId: string;
  attempt: number;
}

/** Events converted from one run event (or none): appended together, never split across batches. */
interface Group {
  items: ThreadEventItem[];
  /** The run event they come from (-1: none). */
  through: number;
}

/**
 * Appends a thread's protocol events to its shared log in Redis, in order, in batches (one call
 * in flight; what arrives meanwhile goes in the next). A failed batch is retried as it was: its
 * last uid tells the store whether it was applied already, so a lost reply adds nothing twice.
 * A run's pump (`pump` given) is fenced by its attempt: once a later attempt took the pump, its
 * batches are refused and `onFenced` stops it.
 */
export class SharedLogWriter implements LogSink {
  private queue: Group[] = [];
  private inFlight: Group[] | null = null;
  private flushing = false;
  private fenced = false;
  private readonly retry = new RedisRetry();
  private readonly idleWaiters = new IdleWaiters();
  private n = 0;
  /** A prefix no other writer uses: uids stay unique across replicas and restarts. */
  private readonly prefix = crypto.randomBytes(6).toString("base64url");
  onFenced: () => void = () => undefined;

  constructor(
    private readonly threadId: string,
    private readonly store: ThreadEventStore,
    private readonly log: ThreadLog,
    private readonly logger: Logger,
    private readonly pump: PumpIdentity | null = null,
  ) {}

  push(body: string, origin: LogOrigin | undefined): void {
    this.pushGroup([body], origin, -1);
  }

  /** Appends the events converted from run event `through` as one unit. */
  pushGroup(bodies: string[], origin: LogOrigin | undefined, through: number): void {
    if (this.fenced) return;
    const items = bodies.map((body) => ({
      uid: `${this.prefix}.${++this.n}`,
      body,
      runId: origin?.runId ?? "",
      assistantId: origin?.assistantId ?? "",
    }));
    this.queue.push({ items, through });
    if (!this.flushing && !this.retry.pending) void this.flush();
  }

  /** Resolves once everything pushed is in Redis (or refused), or after `ms`. */
  async drained(ms: number): Promise<void> {
    if (this.idle()) return;
    await this.idleWaiters.wait(ms);
  }

  private idle(): boolean {
    return this.fenced || (!this.inFlight && !this.queue.length);
  }

  private nextBatch(): Group[] {
    let count = 0;
    let i = 0;
    while (i < this.queue.length && (i === 0 || count + this.queue[i].items.length <= BATCH))
      count += this.queue[i++].items.length;
    return this.queue.splice(0, i);
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (!this.fenced && (this.inFlight || this.queue.length)) {
        this.inFlight ??= this.nextBatch();
        const items = this.inFlight.flatMap((g) => g.items);
        const through = Math.max(-1, ...this.inFlight.map((g) => g.through));
        const fence = this.pump ? { ...this.pump, through } : undefined;
        // The floor: after Redis lost the stream, numbering continues past what this replica has seen.
        const first = items.length ? await this.store.append(this.threadId, items, this.log.lastSeq, fence) : 0;
        this.inFlight = null;
        if (first === -1) this.fence();
      }
    } catch (err) {
      this.logger.warn({ err, threadId: this.threadId }, "cannot write protocol events to redis; retrying");
      this.retry.schedule(() => void this.flush());
    } finally {
      this.flushing = false;
    }
    if (this.idle()) this.idleWaiters.release();
  }

  private fence(): void {
    this.fenced = true;
    this.queue = [];
    this.logger.warn(
      { threadId: this.threadId, ...this.pump },
      "a later attempt pumps this run's protocol events: this attempt's are refused",
    );
    this.onFenced();
  }
}

/**
 * Replicas: every thread log mirrors the thread's shared log. Its kept events are read first
 * (`ready`), then it follows the stream from the last one (XREAD from an id: nothing falls
 * between the two). Appends go to the store and come back like any other replica's.
 */
export function shareThroughRedis(store: ThreadEventStore, logger: Logger): ShareLog {
  return (threadId, log) => {
    log.sink = new SharedLogWriter(threadId, store, log, logger);
    let unsubscribe: (() => void) | null = null;
    let detached = false;
    log.detach = () => {
      detached = true;
      unsubscribe?.();
    };
    log.ready = (async () => {
      try {
        log.ingest(await store.backlog(threadId));
      } catch (err) {
        // Redis down: the follow below delivers the kept events once it is back.
        logger.warn({ err, threadId }, "cannot read a thread's protocol events from redis");
      }
      if (detached) return;
      unsubscribe = store.follow(threadId, log.lastSeq, {
        entries: (list) => log.ingest(list),
        failed: (err) => logger.warn({ err, threadId }, "following a thread's protocol events: redis unreachable"),
      });
    })();
  };
}
