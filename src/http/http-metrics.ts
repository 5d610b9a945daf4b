import type { Context } from "hono";
import { Counter, Histogram, type Registry } from "prom-client";

/**
 * Requests by route and status. The route is the matched pattern (`/v2/deployments/:deployment_id`),
 * never the raw path, so ids do not make a series each; an unmatched request is `unmatched`.
 */
export function routeOf(matched: ReadonlyArray<{ path: string; method: string }>): string {
  for (let i = matched.length - 1; i >= 0; i--)
    if (matched[i].method !== "ALL" && matched[i].path !== "/*") return matched[i].path;
  return "unmatched";
}

export class HttpMetrics {
  private readonly requests: Counter<"method" | "route" | "status">;
  private readonly duration: Histogram<"method" | "route">;

  /** `prefix` names the families (`wharf` for the control plane, `wharf_agent` for an agent server); `subject` starts their help. */
  constructor(registry: Registry, prefix = "wharf", subject = "Control-plane") {
    this.requests = new Counter({
      name: `${prefix}_http_requests_total`,
      help: `${subject} HTTP requests by method, route pattern and status`,
      labelNames: ["method", "route", "status"],
      registers: [registry],
    });
    this.duration = new Histogram({
      name: `${prefix}_http_request_duration_seconds`,
      help: `${subject} HTTP request duration by method and route pattern`,
      labelNames: ["method", "route"],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    });
  }

  observe(c: Context, ms: number): void {
    const route = routeOf(c.req.matchedRoutes);
    this.requests.inc({ method: c.req.method, route, status: String(c.res.status) });
    this.duration.observe({ method: c.req.method, route }, ms / 1000);
  }
}
