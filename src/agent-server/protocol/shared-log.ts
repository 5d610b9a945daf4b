import crypto from "node:crypto";
import { RedisRetry, type ThreadEventItem, type ThreadEventStore } from "../../cluster/index.ts";
import type { Logger } from "../../log/logger.ts";
import type { LogOrigin, LogSink, ShareLog, ThreadLog } from "./thread-log.ts";

const BATCH = 500;

/**
 * Appends a thread's protocol events to its shared log in Redis, in order, in batches (one call
 * in flight; what arrives meanwhile goes in the next). A failed batch is retried as it was: its
 * last uid tells the store whether it was applied already, so a lost reply adds nothing twice.
 */
export class SharedLogWriter implements LogSink {
  private queue: ThreadEventItem[] = [];
  private inFlight: ThreadEventItem[] | null = null;
  private flushing = false;
  private readonly retry = new RedisRetry();
  private n = 0;
  /** A prefix no other writer uses: uids stay unique across replicas and restarts. */
  private readonly prefix = crypto.randomBytes(6).toString("base64url");

  constructor(
    private readonly threadId: string,
    private readonly store: ThreadEventStore,
    private readonly log: ThreadLog,
    private readonly logger: Logger,
  ) {}

  push(body: string, origin: LogOrigin | undefined): void {
    this.queue.push({
      uid: `${this.prefix}.${++this.n}`,
      body,
      runId: origin?.runId ?? "",
      assistantId: origin?.assistantId ?? "",
    });
    if (!this.flushing && !this.retry.pending) void this.flush();
  }

  private async flush(): Promise<void> {
    this.flushing = true;
    try {
      while (this.inFlight || this.queue.length) {
        this.inFlight ??= this.queue.splice(0, BATCH);
        // The floor: after Redis lost the stream, numbering continues past what this replica has seen.
        await this.store.append(this.threadId, this.inFlight, this.log.lastSeq);
        this.inFlight = null;
      }
    } catch (err) {
      this.logger.warn({ err, threadId: this.threadId }, "cannot write protocol events to redis; retrying");
      this.retry.schedule(() => void this.flush());
    } finally {
      this.flushing = false;
    }
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
        logger.warn({ err: (err as Error).message, threadId }, "cannot read a thread's protocol events from redis");
      }
      if (detached) return;
      unsubscribe = store.follow(threadId, log.lastSeq, {
        entries: (list) => log.ingest(list),
        failed: (err) =>
          logger.warn({ err: err.message, threadId }, "following a thread's protocol events: redis unreachable"),
      });
    })();
  };
}
