import type { Hono } from "hono";
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import { HttpMetrics } from "../../http/http-metrics.ts";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import { CORS_HEADERS } from "../wire.ts";

const RUN_STATUSES = ["pending", "running", "success", "error", "timeout", "interrupted"] as const;

/**
 * Every status with its count (0 when the table has none), so a scrape always carries the same
 * series and a status that drained reads 0 rather than vanishing.
 */
export function runCountsByStatus(
  rows: ReadonlyArray<{ status: string; n: number | string | bigint }>,
): Map<string, number> {
  const out = new Map<string, number>(RUN_STATUSES.map((s) => [s, 0]));
  for (const r of rows) out.set(r.status, Number(r.n));
  return out;
}

/**
 * The agent server's Prometheus families (`prom-client`, the control plane's HTTP counters reused):
 * HTTP requests by route pattern and status (this process), runs by status and the queue depth
 * (this server's rows, read at each scrape), and run durations and outcomes (runs that ended in this process).
 */
export class AgentMetrics {
  readonly registry = new Registry();
  readonly http: HttpMetrics;

  constructor(ctx: AgentServerContext, engine: RunEngine) {
    this.http = new HttpMetrics(this.registry, "wharf_agent", "Agent-server");
    const counts = async () => {
      const rows = await ctx.db
        .selectFrom("agent_runs")
        .select(["status", (eb) => eb.fn.countAll<number>().as("n")])
        .where("server_id", "=", ctx.serverId)
        .groupBy("status")
        .execute();
      return runCountsByStatus(rows);
    };
    new Gauge({
      name: "wharf_agent_runs",
      help: "Runs of this agent server by status (kept rows)",
      labelNames: ["status"],
      registers: [this.registry],
      async collect() {
        for (const [status, n] of await counts()) this.set({ status }, n);
      },
    });
    new Gauge({
      name: "wharf_agent_run_queue_depth",
      help: "Runs waiting to start (pending)",
      registers: [this.registry],
      async collect() {
        this.set((await counts()).get("pending") ?? 0);
      },
    });
    // The histogram has no labels (one latency distribution); the outcomes are counted beside it.
    const duration = new Histogram({
      name: "wharf_agent_run_duration_seconds",
      help: "How long runs that ended in this process executed",
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300],
      registers: [this.registry],
    });
    const ended = new Counter({
      name: "wharf_agent_runs_ended_total",
      help: "Runs that ended in this process, by final status",
      labelNames: ["status"],
      registers: [this.registry],
    });
    engine.onRunEnded((e) => {
      duration.observe(e.seconds);
      ended.inc({ status: e.status });
    });
  }

  async scrape(): Promise<Response> {
    return new Response(await this.registry.metrics(), {
      headers: { ...CORS_HEADERS, "content-type": this.registry.contentType },
    });
  }
}

/** Counts every request of the app (registered first, so it sees the final status, errors included). */
export function observeAgentHttp(app: Hono<AgentEnv>, metrics: AgentMetrics): void {
  app.use("*", async (c, next) => {
    const t0 = performance.now();
    await next();
    metrics.http.observe(c, performance.now() - t0);
  });
}
