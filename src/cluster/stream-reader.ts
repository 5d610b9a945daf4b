import type { Logger } from "../log/logger.ts";
import type { RedisConnection } from "./redis-connection.ts";
import type { RawEntry } from "./stream-ids.ts";

/** Orders two stream ids (`<ms>-<seq>`) numerically. */
export function compareIds(a: string, b: string): number {
  const [am, as] = a.split("-").map(BigInt);
  const [bm, bs] = b.split("-").map(BigInt);
  if (am !== bm) return am < bm ? -1 : 1;
  if (as !== bs) return (as ?? 0n) < (bs ?? 0n) ? -1 : 1;
  return 0;
}

export interface StreamSink {
  /** Entries after the sink's last id, in order. */
  entries(list: RawEntry[]): void;
  /** Redis stayed unreachable: the follow cannot go on. */
  failed(err: Error): void;
}

interface Sub {
  key: string;
  after: string;
  sink: StreamSink;
}

const BLOCK_MS = 1000;
/** How long Redis may stay unreachable before followers are told (they end with a clean error). */
const DOWN_GRACE_MS = 5000;

/**
 * One blocking connection per process reads every stream its clients follow: `XREAD BLOCK …
 * STREAMS k1…kn id1…idn`, re-issued (woken with `CLIENT UNBLOCK` from the command connection) when
 * the set changes. XREAD from a follower's last id answers the backlog and then the live tail in
 * one command, so there is no subscribe-then-replay race.
 */
export class StreamReader {
  private readonly subs = new Set<Sub>();
  private generation = 0;
  private readGeneration = -1;
  private changed: (() => void) | null = null;
  private closed = false;
  private readerId: number | null = null;
  private readonly loop: Promise<void>;

  constructor(
    private readonly reader: RedisConnection,
    private readonly commands: RedisConnection,
    private readonly log: Logger,
  ) {
    this.loop = this.run();
  }

  /** Follows `key` after id `after`; returns the unsubscribe. */
  subscribe(key: string, after: string, sink: StreamSink): () => void {
    const sub: Sub = { key, after, sink };
    this.subs.add(sub);
    this.touch();
    return () => {
      if (this.subs.delete(sub)) this.touch();
    };
  }

  private touch(): void {
    this.generation++;
    const wake = this.changed;
    this.changed = null;
    wake?.();
    void this.unblock();
  }

  /** Wakes the blocked XREAD so it is re-issued with the new set (retried until it took effect). */
  private async unblock(): Promise<void> {
    const gen = this.generation;
    for (let i = 0; i < 50 && !this.closed && this.readGeneration < gen && this.readerId !== null; i++) {
      const r = await this.commands.command<number>(["CLIENT", "UNBLOCK", this.readerId]).catch(() => 0);
      if (Number(r) === 1) return;
      await new Promise((res) => setTimeout(res, 5));
    }
  }

  private async run(): Promise<void> {
    let downSince: number | null = null;
    while (!this.closed) {
      if (this.subs.size === 0) {
        await new Promise<void>((r) => (this.changed = r));
        continue;
      }
      // One cursor per key: the earliest of its followers (each filters what it has seen).
      const cursors = new Map<string, string>();
      for (const s of this.subs) {
        const c = cursors.get(s.key);
        if (c === undefined || compareIds(s.after, c) < 0) cursors.set(s.key, s.after);
      }
      this.readGeneration = this.generation;
      try {
        if (this.readerId === null) this.readerId = await this.reader.clientId();
        const reply = await this.reader.command<Array<[string, RawEntry[]]> | null>([
          "XREAD",
          "COUNT",
          1000,
          "BLOCK",
          BLOCK_MS,
          "STREAMS",
          ...cursors.keys(),
          ...cursors.values(),
        ]);
        downSince = null;
        for (const [key, list] of reply ?? []) this.deliver(key, list);
      } catch (err) {
        if (this.closed) return;
        this.readerId = null; // a reconnect is a new client id
        downSince ??= Date.now();
        if (Date.now() - downSince > DOWN_GRACE_MS) {
          const cause = new Error(`redis unreachable for ${DOWN_GRACE_MS} ms: ${(err as Error).message}`, {
            cause: err,
          });
          for (const s of [...this.subs]) s.sink.failed(cause);
          downSince = null;
        }
        await new Promise((r) => setTimeout(r, 200));
      }
    }
  }

  private deliver(key: string, list: RawEntry[]): void {
    if (!list.length) return;
    for (const s of [...this.subs]) {
      if (s.key !== key || !this.subs.has(s)) continue;
      const fresh = list.filter((e) => compareIds(e[0], s.after) > 0);
      if (!fresh.length) continue;
      s.after = fresh[fresh.length - 1][0];
      try {
        s.sink.entries(fresh);
      } catch (err) {
        this.log.warn({ err, key }, "a stream follower failed on its entries");
      }
    }
  }

  async close(): Promise<void> {
    this.closed = true;
    this.changed?.();
    if (this.readerId !== null) await this.commands.command(["CLIENT", "UNBLOCK", this.readerId]).catch(() => 0);
    await Promise.race([this.loop, new Promise((r) => setTimeout(r, 1500).unref())]);
  }
}
