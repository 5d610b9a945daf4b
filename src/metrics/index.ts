import crypto from "node:crypto";
import type { Context } from "hono";
import { Registry } from "prom-client";
import type { Feature, PlatformContext } from "../platform/context.ts";
import { HttpMetrics } from "../http/http-metrics.ts";
import { registerRunMetrics } from "./run-metrics.ts";
import { registerStateCollectors } from "./state-collectors.ts";

/**
 * `GET /metrics`: Prometheus text for operators. Off unless `WHARF_METRICS_TOKEN` is set; then only
 * `Authorization: Bearer <that token>` reads it (workspace API keys do not: the numbers span every
 * workspace). HTTP counters are this process's; the state gauges come from the database.
 */
const byPlatform = new WeakMap<PlatformContext, HttpMetrics>();

/** Called by the control plane's access log for every request (a no-op without the feature). */
export function observeHttp(ctx: PlatformContext, c: Context, ms: number): void {
  byPlatform.get(ctx)?.observe(c, ms);
}

const digest = (v: string) => crypto.createHash("sha256").update(v).digest();

/** Whether the Authorization header carries the operator's token (compared in constant time). */
export function operatorAuthorized(header: string | undefined, token: string): boolean {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return m !== null && crypto.timingSafeEqual(digest(m[1]), digest(token));
}

export function createMetricsFeature(): Feature {
  let stopRuns: (() => void) | null = null;
  return {
    name: "metrics",
    async stop() {
      stopRuns?.();
      stopRuns = null;
    },
    rootRoutes(app, ctx) {
      const token = ctx.config.settings.WHARF_METRICS_TOKEN;
      if (!token) return;
      const registry = new Registry();
      byPlatform.set(ctx, new HttpMetrics(registry));
      registerStateCollectors(registry, ctx.db, ctx.log);
      stopRuns = registerRunMetrics(registry);
      app.get("/metrics", async (c) => {
        if (!operatorAuthorized(c.req.header("authorization"), token))
          return c.json(
            { detail: "The metrics need the operator's token (Authorization: Bearer, WHARF_METRICS_TOKEN)" },
            401,
            { "www-authenticate": "Bearer" },
          );
        return c.body(await registry.metrics(), 200, { "content-type": registry.contentType });
      });
    },
  };
}
