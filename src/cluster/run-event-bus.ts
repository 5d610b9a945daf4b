import crypto from "node:crypto";
import type { Logger } from "../log/logger.ts";
import { openRedis, type RedisConnection } from "./redis-connection.ts";
import { APPEND_SCRIPT, CLAIM_SCRIPT, THREAD_APPEND_SCRIPT, THREAD_PUMP_CLAIM_SCRIPT } from "./run-stream-scripts.ts";
import { RunStreamWriter, type WriterSource } from "./run-stream-writer.ts";
import { StreamReader } from "./stream-reader.ts";
import {
  nextStep,
  parseRunEntry,
  parseThreadEventEntry,
  runAttemptKey,
  runStreamKey,
  streamId,
  threadEventsKey,
  threadPumpKey,
  threadRunsKey,
  type RawEntry,
  type RunStreamEntry,
  type ThreadEventEntry,
} from "./stream-ids.ts";

/** Streams stay bounded: a run's history past this many entries is trimmed (approximately). */
const MAX_LEN = 20_000;
/** While a run executes its stream lives this long past its last append (a writer that died leaves nothing forever). */
const LIVE_TTL_SECONDS = 3600;
/** How often a follower of a run checks the run's row, so a run that ended without an end marker still ends its followers. */
const ROW_CHECK_MS = 2000;

/** A thread's protocol log: at most this many events are kept (approximately), as in one process. */
const THREAD_MAX_LEN = 10_000;
/** A thread's protocol log lives this long past its last event (a client reconnecting with `since`). */
const THREAD_TTL_SECONDS = 3600;

/** One event to add to a thread's protocol log. */
export interface ThreadEventItem {
  /** Unique per append (a retried batch is recognised by its last uid). */
  uid: string;
  body: string;
  runId: string;
  assistantId: string;
}

/** The pump of one run attempt's protocol events (on its executing replica): what fences its appends. */
export interface PumpFence {
  runId: string;
  attempt: number;
  /** The last run event the batch converts (-1: none): where the next attempt's pump continues. */
  through: number;
}

/** The shared protocol logs of threads: any replica appends (numbered atomically) and follows. */
export interface ThreadEventStore {
  /**
   * Appends in order after the stream's top (or `floor`, if higher); the first seq given, 0 for a
   * retry already applied, -1 when `fence` names an attempt a later one replaced.
   */
  append(threadId: string, items: ThreadEventItem[], floor: number, fence?: PumpFence): Promise<number>;
  /** Takes a run's pump for an attempt: the last run event converted (-1: none), or null when a later attempt has it. */
  claimPump(threadId: string, runId: string, attempt: number): Promise<number | null>;
  /** Every entry kept, oldest first. */
  backlog(threadId: string): Promise<ThreadEventEntry[]>;
  /** Entries after seq `after`, live; `failed` when Redis stays unreachable. Returns the unsubscribe. */
  follow(
    threadId: string,
    after: number,
    sink: { entries(list: ThreadEventEntry[]): void; failed(err: Error): void },
  ): () => void;
}

/** A follow ended because entries are missing (Redis lost them): the client should fall back to join/state. */
export class StreamGapError extends Error {}

/**
 * Run events through Redis Streams, one per run: the executing replica appends (fenced by the
 * run's attempt), any replica follows. Redis holds only what may be lost: stream history for the
 * resumable window; runs, checkpoints and state stay in PostgreSQL.
 */
export class RunEventBus {
  private readonly shas = new Map<string, string>();

  private constructor(
    private readonly commands: RedisConnection,
    private readonly reader: StreamReader,
    private readonly readerConn: RedisConnection,
    private readonly log: Logger,
  ) {}

  static async open(url: string, log: Logger): Promise<RunEventBus> {
    const commands = await openRedis(url, log, "commands");
    let readerConn: RedisConnection;
    try {
      readerConn = await openRedis(url, log, "stream reader");
    } catch (err) {
      await commands.close();
      throw err;
    }
    return new RunEventBus(commands, new StreamReader(readerConn, commands, log), readerConn, log);
  }

  /** Runs a script by its SHA, loading it when Redis does not know it (first use, or after a restart). */
  private async script(source: string, keys: string[], args: Array<string | number>): Promise<number> {
    const sha = this.shas.get(source) ?? crypto.createHash("sha1").update(source).digest("hex");
    this.shas.set(source, sha);
    try {
      return Number(await this.commands.command(["EVALSHA", sha, keys.length, ...keys, ...args]));
    } catch (err) {
      if (!/NOSCRIPT/.test((err as Error).message)) throw err;
      return Number(await this.commands.command(["EVAL", source, keys.length, ...keys, ...args]));
    }
  }

  /**
   * Takes a run's stream for an attempt: raises the attempt key (older attempts are fenced from now
   * on) and answers how many events the stream holds, from which this attempt numbers its own.
   * Null when a later attempt already owns it.
   */
  async claim(runId: string, attempt: number): Promise<number | null> {
    const top = await this.script(
      CLAIM_SCRIPT,
      [runStreamKey(runId), runAttemptKey(runId)],
      [attempt, LIVE_TTL_SECONDS],
    );
    return top < 0 ? null : top;
  }

  /** A writer mirroring an attempt's events (see RunStreamWriter). */
  writer(runId: string, attempt: number, source: WriterSource, onFenced: () => void): RunStreamWriter {
    return new RunStreamWriter(
      runId,
      source,
      {
        attempt,
        maxLen: MAX_LEN,
        liveTtlSeconds: LIVE_TTL_SECONDS,
        onFenced,
        append: (keys, args) => this.script(APPEND_SCRIPT, keys, args),
      },
      this.log,
    );
  }

  /**
   * A run's entries after event `after`, live, until its end marker; `isOver` (the run's row) ends a
   * follow whose run ended without one (cancelled while queued, or its writer died). Throws
   * StreamGapError when entries are missing.
   */
  async *followRun(
    runId: string,
    after: number,
    signal: AbortSignal,
    isOver: () => Promise<boolean>,
  ): AsyncGenerator<RunStreamEntry & { kind: "event" }> {
    const key = runStreamKey(runId);
    const entries = this.entries(key, after < 0 ? "0-0" : streamId(after), signal);
    let last = after;
    let overSince: number | null = null;
    try {
      for (;;) {
        const next = await entries.next(ROW_CHECK_MS);
        if (next === "aborted") return;
        if (next === "timeout") {
          // Quiet: is the run still going? Once it is over, give its writer one more period.
          if (overSince === null && (await isOver())) overSince = Date.now();
          else if (overSince !== null) return;
          continue;
        }
        for (const raw of next) {
          const entry = parseRunEntry(raw);
          if (!entry) continue;
          const step = nextStep(last, entry);
          if (step === "skip") continue;
          if (step === "gap")
            throw new StreamGapError(`run ${runId}: events ${last + 1}…${entry.n - 1} are no longer in redis`);
          if (entry.kind === "end") return;
          last = entry.n;
          yield entry;
        }
      }
    } finally {
      entries.close();
    }
  }

  /** A stream's raw entries after `after`, as batches, with a timeout per wait. */
  private entries(key: string, after: string, signal: AbortSignal) {
    const queue: RawEntry[][] = [];
    let failure: Error | null = null;
    let wake: (() => void) | null = null;
    const unsubscribe = this.reader.subscribe(key, after, {
      entries: (list) => {
        queue.push(list);
        wake?.();
      },
      failed: (err) => {
        failure = err;
        wake?.();
      },
    });
    const onAbort = () => wake?.();
    signal.addEventListener("abort", onAbort, { once: true });
    return {
      next: async (timeoutMs: number): Promise<RawEntry[] | "timeout" | "aborted"> => {
        if (!queue.length && !failure && !signal.aborted) {
          await new Promise<void>((resolve) => {
            const t = setTimeout(resolve, timeoutMs);
            wake = () => {
              clearTimeout(t);
              resolve();
            };
          });
          wake = null;
        }
        if (failure) throw failure;
        if (signal.aborted) return "aborted";
        return queue.shift() ?? "timeout";
      },
      close: () => {
        unsubscribe();
        signal.removeEventListener("abort", onAbort);
      },
    };
  }

  /** Records that a run of the thread started (any replica's thread stream follows it). */
  async threadRunStarted(threadId: string, runId: string): Promise<void> {
    const key = threadRunsKey(threadId);
    await this.commands.command(["XADD", key, "MAXLEN", "~", 100, "*", "run", runId]);
    await this.commands.command(["EXPIRE", key, LIVE_TTL_SECONDS]);
  }

  /**
   * Calls `onRun` with the id of each run of the thread that starts from now on, until `signal`
   * aborts; resolves once the watch is in place (a run started after that is not missed).
   */
  async watchThreadRuns(threadId: string, signal: AbortSignal, onRun: (runId: string) => void): Promise<void> {
    const key = threadRunsKey(threadId);
    const top = await this.commands.command<RawEntry[]>(["XREVRANGE", key, "+", "-", "COUNT", 1]);
    const entries = this.entries(key, top?.[0]?.[0] ?? "0-0", signal);
    void (async () => {
      try {
        while (!signal.aborted) {
          const next = await entries.next(60_000);
          if (next === "aborted") return;
          if (next === "timeout") continue;
          for (const [, fields] of next) {
            const i = fields.indexOf("run");
            if (i >= 0 && fields[i + 1]) onRun(fields[i + 1]);
          }
        }
      } catch (err) {
        this.log.warn({ err, threadId }, "thread run watch ended");
      } finally {
        entries.close();
      }
    })();
  }

  /** The threads' protocol logs, kept in Redis like run events. */
  readonly threadEvents: ThreadEventStore = {
    append: async (threadId, items, floor, fence) => {
      const args: Array<string | number> = [
        THREAD_MAX_LEN,
        THREAD_TTL_SECONDS,
        floor,
        fence?.attempt ?? 0,
        fence?.through ?? -1,
      ];
      for (const it of items) args.push(it.uid, it.body, it.runId, it.assistantId);
      const keys = [threadEventsKey(threadId)];
      if (fence) keys.push(threadPumpKey(threadId, fence.runId));
      return this.script(THREAD_APPEND_SCRIPT, keys, args);
    },
    claimPump: async (threadId, runId, attempt) => {
      const n = await this.script(
        THREAD_PUMP_CLAIM_SCRIPT,
        [threadPumpKey(threadId, runId)],
        [attempt, THREAD_TTL_SECONDS],
      );
      return n === -2 ? null : n;
    },
    backlog: async (threadId) => {
      const raw = await this.commands.command<RawEntry[] | null>(["XRANGE", threadEventsKey(threadId), "-", "+"]);
      return (raw ?? []).map(parseThreadEventEntry).filter((e): e is ThreadEventEntry => e !== null);
    },
    follow: (threadId, after, sink) =>
      this.reader.subscribe(threadEventsKey(threadId), `0-${after}`, {
        entries: (list) =>
          sink.entries(list.map(parseThreadEventEntry).filter((e): e is ThreadEventEntry => e !== null)),
        failed: (err) => sink.failed(err),
      }),
  };

  async close(): Promise<void> {
    await this.reader.close();
    await this.readerConn.close();
    await this.commands.close();
  }
}
