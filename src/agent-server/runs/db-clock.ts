import { sql, type Kysely } from "kysely";
import type { Database } from "../../store/schema.ts";

/**
 * The database's clock as seen from this process: `now()` read from PostgreSQL and the offset to
 * this machine's clock. Leases are written and compared on it, so replicas on machines whose clocks
 * disagree still agree on when a lease ends.
 */
export function clockOffset(sentAtMs: number, receivedAtMs: number, databaseNowMs: number): number {
  // The database read its clock about halfway through the round trip.
  return Math.round(databaseNowMs - (sentAtMs + receivedAtMs) / 2);
}

/** An instant on the database's clock, `offsetMs` from now, as the ISO text leases are stored in. */
export function databaseTime(localNowMs: number, offsetMs: number, plusMs = 0): string {
  return new Date(localNowMs + offsetMs + plusMs).toISOString();
}

const RESAMPLE_MS = 10_000;

export class DbClock {
  private offset = 0;
  private sampledAt = 0;

  constructor(
    private readonly db: Kysely<Database> | null,
    private readonly now: () => number = Date.now,
  ) {}

  /** Re-reads the database's clock when the last reading is old (PostgreSQL only; SQLite is this machine). */
  async refresh(): Promise<void> {
    if (!this.db || this.now() - this.sampledAt < RESAMPLE_MS) return;
    const sent = this.now();
    const r = await sql<{
      ms: string;
    }>`select (extract(epoch from clock_timestamp()) * 1000)::bigint::text as ms`.execute(this.db);
    const received = this.now();
    this.offset = clockOffset(sent, received, Number(r.rows[0].ms));
    this.sampledAt = received;
  }

  /** Now (plus `plusMs`) on the database's clock. */
  iso(plusMs = 0): string {
    return databaseTime(this.now(), this.offset, plusMs);
  }

  get offsetMs(): number {
    return this.offset;
  }
}
