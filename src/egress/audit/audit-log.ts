import type { Kysely } from "kysely";
import type { Logger } from "../../log/logger.ts";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import type { Database } from "../../store/schema.ts";
import type { EgressAuditLogTable } from "../egress-tables.ts";
import { auditKey } from "./audit-batch.ts";
import { notifyRefusal } from "./refusals.ts";

/**
 * One audited egress decision: an injection, a signing, a callback, a raw tunnel or a block. Never
 * a credential value: paths are recorded without their query string (queries carry tokens).
 */
export interface AuditEvent {
  workspaceId: string;
  sandboxId: string;
  kind: "inject" | "block" | "tunnel" | "sign" | "callback" | "credential";
  decision: "injected" | "blocked" | "allowed" | "failed" | "signed" | "refused";
  rule?: string | null;
  host: string;
  port: number;
  method?: string | null;
  path?: string | null;
  status?: number | null;
  reason?: string | null;
  /** How many identical events this one stands for (the data plane folds them before sending). */
  count?: number;
}

export interface AuditSink {
  record(event: AuditEvent): void;
}

export const MAX_AUDIT_PATH = 512;

interface Pending {
  event: AuditEvent;
  at: string;
  lastAt: string;
  count: number;
}

/**
 * Writes audit events in batches. Identical events within one flush window (same sandbox, kind,
 * decision, rule, host, port, method, path, status, reason) become one row with a count, so a
 * busy sandbox costs a few rows per second, not one per request. The buffer is bounded: past the
 * bound, events are counted and written as one "dropped" row instead of growing memory.
 */
export class DbAuditLog implements AuditSink {
  private pending = new Map<string, Pending>();
  private dropped = new Map<string, { event: AuditEvent; count: number }>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> = Promise.resolve();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly log: Logger | null,
    private readonly flushMs = 250,
    private readonly maxPending = 5000,
  ) {}

  record(event: AuditEvent): void {
    notifyRefusal(event);
    const path = event.path ? event.path.slice(0, MAX_AUDIT_PATH) : null;
    const e = { ...event, path };
    // Events folded by the data plane arrive with their count.
    const n = event.count ?? 1;
    const key = auditKey(e);
    const now = nowIso();
    const hit = this.pending.get(key);
    if (hit) {
      hit.count += n;
      hit.lastAt = now;
    } else if (this.pending.size < this.maxPending) {
      this.pending.set(key, { event: e, at: now, lastAt: now, count: n });
    } else {
      const d = this.dropped.get(e.sandboxId);
      if (d) d.count += n;
      else this.dropped.set(e.sandboxId, { event: e, count: n });
    }
    this.timer ??= setTimeout(() => void this.flush(), this.flushMs);
    this.timer.unref?.();
  }

  /** Writes everything recorded so far (also called on shutdown and by tests). */
  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = [...this.pending.values()];
    const dropped = [...this.dropped.values()];
    this.pending = new Map();
    this.dropped = new Map();
    const rows = batch.map((p) => ({
      id: newId(),
      workspace_id: p.event.workspaceId,
      sandbox_id: p.event.sandboxId,
      at: p.at,
      last_at: p.lastAt,
      count: p.count,
      kind: p.event.kind,
      decision: p.event.decision,
      rule: p.event.rule ?? null,
      host: p.event.host,
      port: p.event.port,
      method: p.event.method ?? null,
      path: p.event.path ?? null,
      status: p.event.status ?? null,
      reason: p.event.reason ?? null,
    }));
    for (const d of dropped) {
      const now = nowIso();
      rows.push({
        id: newId(),
        workspace_id: d.event.workspaceId,
        sandbox_id: d.event.sandboxId,
        at: now,
        last_at: now,
        count: d.count,
        kind: "block",
        decision: "failed",
        rule: null,
        host: "",
        port: 0,
        method: null,
        path: null,
        status: null,
        reason: "audit buffer full: events of this window were not itemised",
      });
    }
    const write = async () => {
      for (let i = 0; i < rows.length; i += 200)
        await this.db
          .insertInto("egress_audit_log")
          .values(rows.slice(i, i + 200))
          .execute();
    };
    this.flushing = this.flushing.then(write).catch((err) => this.log?.error({ err }, "egress audit log write failed"));
    return this.flushing;
  }
}

/** What the egress-log API shows of a row: everything but the owning workspace and sandbox. */
export type AuditRow = Omit<EgressAuditLogTable, "workspace_id" | "sandbox_id">;

/** Newest first; `before` is the id of the last row of the previous page. */
export async function listAudit(
  db: Kysely<Database>,
  workspaceId: string,
  sandboxId: string,
  opts: { limit: number; before?: string; kind?: string },
): Promise<AuditRow[]> {
  let q = db
    .selectFrom("egress_audit_log")
    .select([
      "id",
      "at",
      "last_at",
      "count",
      "kind",
      "decision",
      "rule",
      "host",
      "port",
      "method",
      "path",
      "status",
      "reason",
    ])
    .where("workspace_id", "=", workspaceId)
    .where("sandbox_id", "=", sandboxId);
  if (opts.before) q = q.where("id", "<", opts.before);
  if (opts.kind) q = q.where("kind", "=", opts.kind);
  const rows = await q.orderBy("id", "desc").limit(opts.limit).execute();
  return rows.map((r) => ({
    ...r,
    count: Number(r.count),
    port: Number(r.port),
    status: r.status === null ? null : Number(r.status),
  }));
}

/** An in-memory sink for tests and benchmarks. */
export class MemoryAudit implements AuditSink {
  events: AuditEvent[] = [];
  record(event: AuditEvent): void {
    if (this.events.length < 100_000) this.events.push(event);
  }
}
