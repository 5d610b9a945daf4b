import { setTimeout as sleep } from "node:timers/promises";
import { sql, type Kysely, type RawBuilder } from "kysely";
import type pg from "pg";
import type { Logger } from "../log/logger.ts";
import { advisoryKey, advisoryPair, pairHeld } from "../store/advisory-lock.ts";
import type { Database } from "../store/schema.ts";

/** The advisory lock space of platform processes' presence (per Wharf schema). */
const SPACE = "presence";

/**
 * A platform process's presence on PostgreSQL: a session-level advisory lock named after its id
 * (the replica id, which is the rollout engine's node id), held on a connection of its own for the
 * process's lifetime. When the process dies, even by kill -9, the kernel closes its socket and
 * PostgreSQL ends the session, which frees the lock: another process reading `pg_locks` knows at
 * once that the holder is gone, where a lease makes it wait until the lease runs out. The lock says
 * nothing about a process that is alive but stalled (its session lives on): leases remain the rule
 * for that. A dropped connection also frees the lock while the process lives; it then takes the
 * lock again on a new connection (`heldForMs` tells since when it holds it without a break).
 */
export class PresenceLock {
  private heldSince: number | null = null;
  private readonly stopping = new AbortController();
  private running: Promise<void> | null = null;
  private warnedBusy = false;
  /** The connection failed and that was logged: the next failures in a row are not (the database may be down). */
  private warnedLost = false;

  constructor(
    /** Compiles the statements (the store's dialect). */
    private readonly db: Kysely<Database>,
    /** A new connection outside the pool on the store's schema (`Store.dedicatedConnection`). */
    private readonly connect: () => Promise<pg.Client>,
    readonly id: string,
    private readonly log: Logger,
    /** How often the holder looks at its session, and waits before taking the lock again after a loss. */
    private readonly checkMs = 250,
  ) {}

  /** Takes the lock; resolves after the first attempt, held or not (it keeps trying in the background). */
  start(): Promise<void> {
    return new Promise<void>((firstAttempt) => {
      this.running = this.keep(firstAttempt);
    });
  }

  /** Since how long (ms) this process has held its lock without a break; null while it does not. */
  heldForMs(now = Date.now()): number | null {
    return this.heldSince === null ? null : now - this.heldSince;
  }

  /** Releases the lock (its connection ends) and stops taking it again. */
  async stop(): Promise<void> {
    this.stopping.abort();
    await this.running;
  }

  private async keep(firstAttempt: () => void): Promise<void> {
    while (!this.stopping.signal.aborted) {
      try {
        await this.holdOnce(firstAttempt);
      } catch (err) {
        if (!this.stopping.signal.aborted && !this.warnedLost)
          this.log.warn(
            { err, node: this.id },
            "lost the connection holding this process's presence lock; taking it again",
          );
        this.warnedLost = true;
      }
      this.heldSince = null;
      firstAttempt();
      await sleep(this.checkMs, undefined, { signal: this.stopping.signal }).catch(() => {
        // Stopping: the loop ends.
      });
    }
  }

  /** One connection: takes the lock and keeps it until the connection fails or the process stops. */
  private async holdOnce(firstAttempt: () => void): Promise<void> {
    const client = await this.connect();
    // The connection's failure, whenever it comes (an unheard `error` event would end the process).
    const lost = new Promise<Error>((resolve) => {
      client.on("error", resolve);
      client.on("end", () => resolve(new Error("the connection ended")));
    });
    const key = advisoryPair(SPACE, this.id);
    const run = async <R>(q: RawBuilder<R>) => {
      const c = q.compile(this.db);
      const res = await Promise.race([client.query(c.sql, [...c.parameters]), lost.then((e) => Promise.reject(e))]);
      return (res as pg.QueryResult).rows[0] as R | undefined;
    };
    try {
      const taken = await run(sql<{ ok: boolean }>`select pg_try_advisory_lock(${key.space}, ${key.id}) as ok`);
      if (!taken?.ok) return this.busy();
      this.heldSince = Date.now();
      this.warnedBusy = false;
      this.warnedLost = false;
      firstAttempt();
      for (;;) {
        const stop = sleep(this.checkMs, "tick" as const, { signal: this.stopping.signal }).catch(
          () => "stop" as const,
        );
        const why = await Promise.race([stop, lost]);
        if (why === "stop") return;
        if (why instanceof Error) throw why;
        // A connection that died quietly fails here; no other session can release the lock.
        const still = await run(sql<{ held: boolean }>`select ${pairHeld(key.space, key.id, "this")} as held`);
        if (!still?.held) throw new Error("the session no longer holds the presence lock");
      }
    } finally {
      this.heldSince = null;
      // Ending the session releases the lock.
      await client.end().catch(() => {
        // Already broken: its session, and the lock, are gone with it.
      });
    }
  }

  private busy(): void {
    if (!this.warnedBusy)
      this.log.warn(
        { node: this.id },
        "another database session holds this process's presence lock: is another platform process running on the same home?",
      );
    this.warnedBusy = true;
  }
}

/** What `presenceOf` read: whose presence locks are held, and how long the database server has been up. */
export interface PresenceReading {
  held: Set<string>;
  dbUpMs: number;
}

/** Which of these processes hold their presence lock right now (any session of the database). */
export async function presenceOf(db: Kysely<Database>, ids: string[]): Promise<PresenceReading> {
  const uptime = sql<number>`(extract(epoch from clock_timestamp() - pg_postmaster_start_time()) * 1000)::float8`;
  if (ids.length === 0) {
    const { rows } = await sql<{ up_ms: number }>`select ${uptime} as up_ms`.execute(db);
    return { held: new Set(), dbUpMs: Number(rows[0]?.up_ms ?? 0) };
  }
  const { rows } = await sql<{ id: string; held: boolean; up_ms: number }>`
    select n.id, ${pairHeld(advisoryKey(SPACE), sql`hashtext(n.id)`)} as held, ${uptime} as up_ms
      from unnest(${ids}::text[]) as n(id)`.execute(db);
  return {
    held: new Set(rows.filter((r) => r.held).map((r) => r.id)),
    dbUpMs: Number(rows[0]?.up_ms ?? 0),
  };
}
