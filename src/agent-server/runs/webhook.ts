import type { Logger } from "../../log/logger.ts";
import { toJson } from "../wire.ts";

/**
 * Tells the run's `webhook` URL that the run ended (POST of the run with its status and output).
 * Best effort: one attempt with a timeout; a failure is logged, never fails the run.
 */
export async function sendWebhook(log: Logger, url: string, payload: Record<string, unknown>): Promise<void> {
  let target: URL;
  try {
    target = new URL(url);
    if (target.protocol !== "http:" && target.protocol !== "https:") throw new Error("only http and https webhooks are sent");
  } catch (err) {
    log.warn({ runId: payload.run_id, err: (err as Error).message }, "run webhook not sent: invalid URL");
    return;
  }
  try {
    const res = await fetch(target, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: toJson({ ...payload, webhook_sent_at: new Date().toISOString() }, false),
      signal: AbortSignal.timeout(10_000),
    });
    await res.body?.cancel();
    if (!res.ok) log.warn({ runId: payload.run_id, status: res.status, host: target.host }, "run webhook answered with an error status");
  } catch (err) {
    log.warn({ runId: payload.run_id, host: target.host, err: (err as Error).message }, "run webhook failed");
  }
}
