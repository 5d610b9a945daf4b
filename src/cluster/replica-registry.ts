import { sql, type Kysely } from "kysely";
import type { Logger } from "../log/logger.ts";
import { nowIso } from "../store/database.ts";
import type { Database } from "../store/schema.ts";
import "./cluster-tables.ts";

/** The database's clock in epoch milliseconds: every lease is computed and compared with it. */
const DB_NOW_MS = sql<string>`(extract(epoch from clock_timestamp()) * 1000)::bigint`;
/** How long a looked-up replica address is reused: forwarding does not query the table per request. */
const LOOKUP_TTL_MS = 500;

export interface ReplicaAddress {
  url: string;
  alive: boolean;
}

/**
 * The `replicas` table: each replica's internal URL under a lease it renews every third of
 * `leaseMs`, on PostgreSQL's clock, so clocks of different machines never enter the arithmetic.
 */
export class ReplicaRegistry {
  private timer: NodeJS.Timeout | null = null;
  private readonly cache = new Map<string, { at: number; value: ReplicaAddress | null }>();

  constructor(
    private readonly db: Kysely<Database>,
    readonly id: string,
    /** Known once the internal listener listens (port 0 in tests). */
    private readonly url: () => string,
    readonly leaseMs: number,
    private readonly log: Logger,
  ) {}

  async register(): Promise<void> {
    const until = sql<string>`${DB_NOW_MS} + ${this.leaseMs}`;
    await this.db
      .insertInto("replicas")
      .values({ id: this.id, url: this.url(), started_at: nowIso(), lease_until_ms: until })
      .onConflict((oc) => oc.column("id").doUpdateSet({ url: this.url(), started_at: nowIso(), lease_until_ms: until }))
      .execute();
    this.timer = setInterval(() => void this.renew(), Math.max(200, Math.floor(this.leaseMs / 3)));
    this.timer.unref();
  }

  private async renew(): Promise<void> {
    try {
      await this.db
        .updateTable("replicas")
        .set({ lease_until_ms: sql<string>`${DB_NOW_MS} + ${this.leaseMs}` })
        .where("id", "=", this.id)
        .execute();
    } catch (err) {
      // The next beat tries again; a lease that runs out meanwhile is what the others act on.
      this.log.warn({ err }, "replica heartbeat failed");
    }
  }

  /** Stops renewing. The row stays: a replica that comes back with the same home takes it again. */
  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** Where a replica listens and whether its lease holds (cached briefly). */
  async lookup(id: string): Promise<ReplicaAddress | null> {
    const hit = this.cache.get(id);
    if (hit && Date.now() - hit.at < LOOKUP_TTL_MS) return hit.value;
    const row = await this.db
      .selectFrom("replicas")
      .select(["url", sql<boolean>`lease_until_ms > ${DB_NOW_MS}`.as("alive")])
      .where("id", "=", id)
      .executeTakeFirst();
    const value = row ? { url: row.url, alive: Boolean(row.alive) } : null;
    this.cache.set(id, { at: Date.now(), value });
    return value;
  }

  /** Replicas other than this one whose lease ran out. */
  async deadReplicas(): Promise<string[]> {
    const rows = await this.db
      .selectFrom("replicas")
      .select("id")
      .where("id", "!=", this.id)
      .where(sql<boolean>`lease_until_ms <= ${DB_NOW_MS}`)
      .execute();
    return rows.map((r) => r.id);
  }
}
