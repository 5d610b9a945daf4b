import { Histogram, type Registry } from "prom-client";
import { onRunEnded } from "../agent-server/index.ts";

export const RUN_BUCKETS_SECONDS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800];

/**
 * Run latency, observed as runs end in this process (a stateless run's row is deleted when it
 * ends, so the table cannot tell it afterwards): from the run's creation, queue wait included, by
 * final status. Returns the unsubscribe.
 */
export function registerRunMetrics(registry: Registry): () => void {
  const duration = new Histogram({
    name: "wharf_run_duration_seconds",
    help: "Agent runs of this process's agent server, from creation (queue wait included) to their end, by final status",
    labelNames: ["status"],
    buckets: RUN_BUCKETS_SECONDS,
    registers: [registry],
  });
  return onRunEnded((e) => duration.observe({ status: e.status }, e.seconds));
}
