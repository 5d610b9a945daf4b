import type { AuditEvent } from "./audit-log.ts";

/** What makes two events the same row (everything but the time and the count). */
export function auditKey(e: AuditEvent): string {
  // Concatenation, not an array join: this runs for every injected request of the data plane.
  return (
    e.sandboxId +
    "\u0000" +
    e.kind +
    "\u0000" +
    e.decision +
    "\u0000" +
    (e.rule ?? "") +
    "\u0000" +
    e.host +
    "\u0000" +
    e.port +
    "\u0000" +
    (e.method ?? "") +
    "\u0000" +
    (e.path ?? "") +
    "\u0000" +
    (e.status ?? "") +
    "\u0000" +
    (e.reason ?? "")
  );
}

/**
 * The data plane's audit events between two sends to the control plane, identical ones folded
 * into one with a `count` (a busy keep-alive connection injects on every request: one entry per
 * window instead of one per request crosses the IPC channel, and the control plane folds the
 * same way anyway). The caller sends when `size` reaches its bound.
 */
export class AuditBatch {
  private entries = new Map<string, AuditEvent>();

  /** Adds one event; true when it is the first of this batch (time to schedule a send). */
  add(event: AuditEvent): boolean {
    const first = this.entries.size === 0;
    const key = auditKey(event);
    const hit = this.entries.get(key);
    if (hit) hit.count = (hit.count ?? 1) + (event.count ?? 1);
    else this.entries.set(key, { ...event, count: event.count ?? 1 });
    return first;
  }

  /** The folded events so far; the batch starts empty again. */
  take(): AuditEvent[] {
    const out = [...this.entries.values()];
    this.entries = new Map();
    return out;
  }

  get size(): number {
    return this.entries.size;
  }
}
