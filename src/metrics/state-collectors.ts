import { sql, type Kysely } from "kysely";
import { Gauge, Histogram, type Registry } from "prom-client";
import type { Logger } from "../log/logger.ts";
import type { Database } from "../store/schema.ts";

/**
 * Gauges read from the database at each scrape, so every platform process on one database reports
 * the same numbers. The tables belong to other features and may be absent (a feature not mounted):
 * each query is read on its own through plain SQL, and a missing table leaves its series empty.
 */

export const BUILD_BUCKETS_SECONDS = [5, 15, 30, 60, 120, 300, 600];

/** Seconds each revision spent BUILDING, from its transitions (entered → left), oldest first. */
export function buildDurations(
  rows: ReadonlyArray<{ revision_id: string; from_status: string | null; to_status: string; at: string }>,
): number[] {
  const entered = new Map<string, number>();
  const out: number[] = [];
  for (const r of rows) {
    if (r.to_status === "BUILDING") entered.set(r.revision_id, Date.parse(r.at));
    else if (r.from_status === "BUILDING" && entered.has(r.revision_id)) {
      out.push(Math.max(0, (Date.parse(r.at) - entered.get(r.revision_id)!) / 1000));
      entered.delete(r.revision_id);
    }
  }
  return out;
}

async function grouped(
  db: Kysely<Database>,
  query: string,
): Promise<Array<{ key: string; sub: string | null; n: number }>> {
  const res = await sql<{ key: string; sub: string | null; n: number | string }>`${sql.raw(query)}`.execute(db);
  return res.rows.map((r) => ({
    key: String(r.key),
    sub: r.sub === null || r.sub === undefined ? null : String(r.sub),
    n: Number(r.n),
  }));
}

/** What every collector reads with: the registry it joins, the database and a quiet reader. */
interface Collecting {
  registry: Registry;
  db: Kysely<Database>;
  /** Runs one read; a failure leaves that series empty this scrape (logged at debug). */
  quietly: (what: string, read: () => Promise<void>) => Promise<void>;
}

export function registerStateCollectors(registry: Registry, db: Kysely<Database>, log: Logger): void {
  const quietly = async (what: string, read: () => Promise<void>) => {
    try {
      await read();
    } catch (err) {
      // The feature owning the table is not mounted (or the database is busy): no series this scrape.
      log.debug({ err, what }, "metrics: a collector had nothing to read");
    }
  };
  const c: Collecting = { registry, db, quietly };
  runsByStatus(c);
  runQueueDepth(c);
  revisionsByStatus(c);
  sandboxesByState(c);
  egressDecisions(c);
  buildDurationHistogram(c);
}

/** A gauge set at each scrape from one grouped count (`key`, optional `sub`, `n`). */
function groupedGauge(
  c: Collecting,
  name: string,
  help: string,
  labelNames: string[],
  query: string,
  label: (r: { key: string; sub: string | null }) => Record<string, string>,
): Gauge {
  const { db, quietly } = c;
  return new Gauge({
    name,
    help,
    labelNames,
    registers: [c.registry],
    async collect() {
      this.reset();
      await quietly(name, async () => {
        for (const r of await grouped(db, query)) this.set(label(r), r.n);
      });
    },
  });
}

function runsByStatus(c: Collecting): void {
  groupedGauge(
    c,
    "wharf_runs",
    "Agent runs of the control plane's agent server by status",
    ["status"],
    "select status as key, null as sub, count(*) as n from agent_runs group by status",
    (r) => ({ status: r.key }),
  );
}

function runQueueDepth(c: Collecting): void {
  groupedGauge(
    c,
    "wharf_run_queue_depth",
    "Agent runs waiting to start (status pending)",
    ["queue"],
    "select 'pending' as key, null as sub, count(*) as n from agent_runs where status = 'pending'",
    () => ({ queue: "runs" }),
  );
}

function revisionsByStatus(c: Collecting): void {
  groupedGauge(
    c,
    "wharf_deployment_revisions",
    "Deployment revisions by status",
    ["status"],
    "select status as key, null as sub, count(*) as n from deployment_revisions group by status",
    (r) => ({ status: r.key }),
  );
}

function sandboxesByState(c: Collecting): void {
  groupedGauge(
    c,
    "wharf_sandboxes",
    "Sandboxes by state",
    ["state"],
    "select status as key, null as sub, count(*) as n from sandboxes group by status",
    (r) => ({ state: r.key }),
  );
}

function egressDecisions(c: Collecting): void {
  groupedGauge(
    c,
    "wharf_egress_decisions",
    "Egress decisions in the audit log by kind and decision (rows fold identical events: their counts summed)",
    ["kind", "decision"],
    "select kind as key, decision as sub, sum(count) as n from egress_audit_log group by kind, decision",
    (r) => ({ kind: r.key, decision: r.sub ?? "" }),
  );
}

function buildDurationHistogram({ registry, db, quietly }: Collecting): void {
  new Histogram({
    name: "wharf_deployment_build_duration_seconds",
    help: "Time deployment revisions spent BUILDING (from their recorded transitions)",
    buckets: BUILD_BUCKETS_SECONDS,
    registers: [registry],
    async collect() {
      this.reset();
      await quietly("builds", async () => {
        const res = await sql<{
          revision_id: string;
          from_status: string | null;
          to_status: string;
          at: string;
        }>`select revision_id, from_status, to_status, at from deployment_revision_transitions where to_status = 'BUILDING' or from_status = 'BUILDING' order by at, id`.execute(
          db,
        );
        const rows = res.rows;
        for (const s of buildDurations(rows)) this.observe(s);
      });
    },
  });
}
