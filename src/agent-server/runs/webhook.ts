import type { Logger } from "../../log/logger.ts";
import { toJson } from "../wire.ts";

/**
 * Tells the run's `webhook` URL that the run ended (POST of the run with its status and output).
 * A path (`/hooks/done`) is a route of this server (`selfUrl`), as on the LangGraph server: it goes
 * through the server's own authentication like any request without credentials.
 * Best effort: one attempt with a timeout; a failure is logged, never fails the run.
 */
export async function sendWebhook(log: Logger, url: string, payload: Record<string, unknown>, selfUrl?: string): Promise<void> {
  let target: URL;
  try {
    if (isWebhookPath(url) && !selfUrl) throw new Error("a webhook path needs the server's own URL");
    target = isWebhookPath(url) ? new URL(url, selfUrl) : new URL(url);
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

/** A webhook given as a path of this server (`/x`, not the scheme-relative `//host/x`). */
export function isWebhookPath(url: string): boolean {
  return url.startsWith("/") && !url.startsWith("//") && !url.startsWith("/\\");
}
