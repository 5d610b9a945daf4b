/**
 * What the lifecycle loop does with one sandbox on one tick, decided from facts the loop gathered
 * (the row, what this process holds in memory, what the driver sees). Pure, so every branch is
 * table-tested without root; `tick` in the manager gathers the facts and acts on the answer.
 */

/** One sandbox as the loop sees it this tick. Times are epoch milliseconds. */
export interface LifecycleFacts {
  status: string;
  statusChangedAt: number;
  stoppedAt: number | null;
  idleTtlSeconds: number;
  deleteAfterStopSeconds: number;
  /** A stop or delete is working on it right now: the loop leaves it alone. */
  held: boolean;
  /** This process is provisioning or deleting it (a background job in flight). */
  inflight: boolean;
  /** Held in memory as live and its init process still runs (only meaningful when `ready`). */
  running: boolean;
  /** Commands and other processes still at work inside it (only counted when running). */
  activeProcesses: number;
  /** Last data-plane activity this process saw (null: not live here). */
  lastActivity: number | null;
}

export interface LifecycleTimes {
  provisionDeadlineMs: number;
  deleteDeadlineMs: number;
  /** How long one TTL "second" is (shortened by tests). */
  ttlSecondMs: number;
}

export type LifecycleAction =
  /** Provisioning past its deadline with nothing running it here: mark it failed. */
  | "fail-provision"
  /** Provisioning past its deadline while this process still works on it: end its processes, then fail it. */
  | "teardown-fail-provision"
  /** A delete that did not finish in time (crash, error): try it again. */
  | "retry-delete"
  /** Ready, but its init process is gone: end what is left, keep its files, report it failed. */
  | "fail-exited"
  /** Ready and at work: it counts as active now. */
  | "touch"
  /** Ready and idle past `idle_ttl_seconds`: stop it. */
  | "idle-stop"
  /** Stopped past `delete_after_stop_seconds`: delete it. */
  | "expire"
  | "none";

export function nextAction(f: LifecycleFacts, now: number, t: LifecycleTimes): LifecycleAction {
  if (f.held) return "none";
  const since = now - f.statusChangedAt;
  switch (f.status) {
    case "provisioning":
      if (!(since > t.provisionDeadlineMs)) return "none";
      return f.inflight ? "teardown-fail-provision" : "fail-provision";
    case "deleting":
      return !f.inflight && since > t.deleteDeadlineMs ? "retry-delete" : "none";
    case "ready":
      if (!f.running) return "fail-exited";
      if (f.activeProcesses > 0) return "touch";
      if (f.idleTtlSeconds > 0 && f.lastActivity !== null && now - f.lastActivity > f.idleTtlSeconds * t.ttlSecondMs)
        return "idle-stop";
      return "none";
    case "stopped":
      if (
        f.deleteAfterStopSeconds > 0 &&
        f.stoppedAt !== null &&
        now - f.stoppedAt > f.deleteAfterStopSeconds * t.ttlSecondMs
      )
        return "expire";
      return "none";
    default:
      return "none";
  }
}
