import { sql, type Kysely, type RawBuilder, type SqlBool } from "kysely";
import { presenceOf, type PresenceLock } from "../../cluster/index.ts";
import { nowIso } from "../../store/database.ts";
import type { Database } from "../../store/schema.ts";
import { mayClaim, ownerGone, readFreeLocks, type FreeLocks, type PresenceView } from "./owner-gone.ts";

/**
 * This process's view, refreshed every tick of the work loop, of which other platform processes
 * are gone although their leases hold (see `owner-gone.ts` for the decision). It reads the
 * presence locks of the owners of live leases only, and remembers since when each has been free.
 */
export class OwnerWatch {
  /** Owners seen gone at the last refresh (claims take their work as if their leases had run out). */
  gone: string[] = [];
  private readonly locks: FreeLocks = { freeSince: new Map(), seenHeld: new Set() };
  private dbUpMs = 0;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly nodeId: string,
    /** This process's own presence (null: SQLite, the lease alone decides). */
    private readonly presence: PresenceLock | null,
    private readonly timing: { graceMs: number; leaseMs: number },
    /** Asks for a tick when a free lock's grace ends, not at the next poll. */
    private readonly wakeAt: (ms: number) => void,
  ) {}

  /** Reads the owners of live leases and their presence; updates `gone`. */
  async refresh(): Promise<void> {
    if (!this.presence) return;
    const owners = await this.leaseHolders();
    if (owners.length === 0) {
      this.locks.freeSince.clear();
      this.gone = [];
      return;
    }
    const reading = await presenceOf(this.db, owners);
    this.dbUpMs = reading.dbUpMs;
    const now = Date.now();
    const gone: string[] = [];
    for (const [id, freeForMs] of readFreeLocks(this.locks, owners, reading.held, now)) {
      if (ownerGone(id, this.nodeId, freeForMs, this.view(now))) gone.push(id);
      // Within its grace: look again when it ends. (Held back for another reason, the poll looks.)
      else if (freeForMs < this.timing.graceMs) this.wakeAt(this.timing.graceMs - freeForMs);
    }
    this.gone = gone;
  }

  /** Whether this process may claim new work now (see `mayClaim`). */
  mayClaim(): boolean {
    return mayClaim(this.view(Date.now()));
  }

  private view(now: number): PresenceView {
    return {
      supported: this.presence !== null,
      selfHeldForMs: this.presence?.heldForMs(now) ?? null,
      dbUpMs: this.dbUpMs,
      ...this.timing,
    };
  }

  /** Other processes that own a rollout lock or a revision under a lease that still holds. */
  private async leaseHolders(): Promise<string[]> {
    const now = nowIso();
    const revs = await this.db
      .selectFrom("deployment_revisions")
      .select("owner")
      .distinct()
      .where("owner", "is not", null)
      .where("owner", "!=", this.nodeId)
      .where("lease_until", ">=", now)
      .execute();
    const locks = await this.db
      .selectFrom("deployments")
      .select("rollout_owner")
      .distinct()
      .where("rollout_owner", "is not", null)
      .where("rollout_owner", "!=", this.nodeId)
      .where("rollout_lease_until", ">=", now)
      .execute();
    return [...new Set([...revs.map((r) => r.owner!), ...locks.map((r) => r.rollout_owner!)])];
  }
}

/**
 * The claims' condition on a leased row: its lease ran out, or its owner is gone (`gone`, from
 * `OwnerWatch`), in the same statement as the claim.
 */
export function lapsedOrGone(
  ownerColumn: string,
  leaseColumn: string,
  now: string,
  gone: readonly string[],
): RawBuilder<SqlBool> {
  const lapsed = sql<SqlBool>`${sql.ref(leaseColumn)} < ${now}`;
  if (gone.length === 0) return lapsed;
  return sql<SqlBool>`(${lapsed} or ${sql.ref(ownerColumn)} in (${sql.join([...gone])}))`;
}
