/**
 * When this process may take over another platform process's work (its rollouts, its in-flight
 * revisions, the revisions it serves): a pure decision, table-tested without a database.
 *
 * The lease is the rule everywhere: work whose lease ran out is anyone's (a process stalled past
 * its lease, SQLite). On PostgreSQL every process also holds a presence lock (see
 * `src/cluster/presence.ts`) that the database frees when the process's session ends: a process
 * killed outright is seen gone at once, without waiting for its lease. Its lock is free too when
 * the process lives but its connection dropped (it then takes the lock again within a few checks),
 * so a free lock counts only once it has stayed free for a grace period, only while this process
 * holds its own lock (if it lost its own, its connections, or the database, may be what failed), and
 * only on a database server up for longer than a lease (a restart frees every lock at once, and
 * every process takes its own again at its own pace). Getting it wrong the other way, taking over
 * from a process that is alive, ends as a lapsed lease does: that process sees the revision's owner
 * changed and stops its own server (`supervise.ts`).
 */

export interface PresenceView {
  /** Presence locks exist (PostgreSQL); false: the lease alone decides (SQLite). */
  supported: boolean;
  /** How long this process has held its own presence lock without a break; null: it does not hold it. */
  selfHeldForMs: number | null;
  /** How long the database server has been up. */
  dbUpMs: number;
  /** A free lock must stay free this long before its owner counts as gone. */
  graceMs: number;
  /** The engine's lease: a database up for less than this has just freed everyone's locks. */
  leaseMs: number;
}

/**
 * Whether `owner`'s process is gone although its leases may still hold. `freeForMs`: how long its
 * presence lock has been seen free without a break (null: seen held, not looked at, or never seen
 * held: a process without presence locks, an earlier version during a rolling upgrade).
 */
export function ownerGone(owner: string, self: string, freeForMs: number | null, v: PresenceView): boolean {
  if (!v.supported || owner === self || freeForMs === null) return false;
  if (v.selfHeldForMs === null || v.selfHeldForMs < v.graceMs) return false;
  if (v.dbUpMs < v.leaseMs) return false;
  return freeForMs >= v.graceMs;
}

/**
 * Whether this process may claim new work. On PostgreSQL not while it does not hold its own
 * presence lock: the others may be taking its work over, and would take anything new at once.
 */
export function mayClaim(v: Pick<PresenceView, "supported" | "selfHeldForMs">): boolean {
  return !v.supported || v.selfHeldForMs !== null;
}

/** What a reader remembers of other owners' presence locks between its readings. */
export interface FreeLocks {
  /** Since when (ms) each owner's lock has been seen free without a break. */
  freeSince: Map<string, number>;
  /**
   * Owners seen holding their lock at least once. Only their free lock says anything: a process
   * that never held one (an earlier Wharf version during a rolling upgrade) has its lease alone.
   */
  seenHeld: Set<string>;
}

/**
 * One reading of the owners of live leases (`held`: those whose lock is held) folded into `m`;
 * answers how long each owner whose lock counts has been seen free (see `ownerGone`).
 */
export function readFreeLocks(m: FreeLocks, owners: string[], held: Set<string>, now: number): Map<string, number> {
  for (const id of [...m.freeSince.keys()]) if (!owners.includes(id) || held.has(id)) m.freeSince.delete(id);
  const freeFor = new Map<string, number>();
  for (const id of owners) {
    if (held.has(id)) m.seenHeld.add(id);
    else if (m.seenHeld.has(id)) {
      const since = m.freeSince.get(id) ?? now;
      m.freeSince.set(id, since);
      freeFor.set(id, now - since);
    }
  }
  return freeFor;
}
