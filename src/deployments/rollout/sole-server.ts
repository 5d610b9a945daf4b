/**
 * Whether a revision's agent server about to start will be the only server of its deployment's
 * storage (threads and runs are scoped by the deployment id, shared by all its revisions). Only
 * then may it start `--exclusive`: settle at once every run still marked running, whose process
 * must be dead. If another revision of the deployment still runs (the one being replaced, draining,
 * here or in another platform process), its runs are alive and must be left alone; they are then
 * settled the slow way, when their lease expires.
 */

/** Another revision of the same deployment, as this process and the database know it. */
export interface OtherRevision {
  /** Its server runs in this platform process (draining included). */
  runningHere: boolean;
  /** Which platform process owns it, per the database (null: none). */
  owner: string | null;
  /** That owner's lease on it (ISO time), renewed while it serves or deploys. */
  leaseUntil: string | null;
  /** The owner recorded a server process for it. */
  hasServer: boolean;
}

export function soleServer(others: OtherRevision[], me: string, nowIso: string): boolean {
  return !others.some((o) => {
    if (o.runningHere) return true;
    // Ours but not running here: whatever of it ran died with our previous process.
    if (!o.owner || o.owner === me || !o.hasServer) return false;
    // Another process's server counts while that process keeps its lease; a process that stopped
    // renewing it is dead, and its confined servers died with it.
    return o.leaseUntil !== null && o.leaseUntil > nowIso;
  });
}
