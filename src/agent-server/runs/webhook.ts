import http from "node:http";
import https from "node:https";
import net from "node:net";
import type { OutboundSettings } from "../../egress/index.ts";
import type { Logger } from "../../log/logger.ts";
import { toJson } from "../wire.ts";
import { nowIso } from "../../store/database.ts";
import type { RunOutcome } from "./run-executor.ts";
import type { Run } from "./runs.ts";

/**
 * Where a webhook may be sent: the address to dial for its URL, or why not. Null: no check here,
 * because every connection of this server already goes through the egress proxy, which applies the
 * same address policy (a confined deployment's server).
 */
export type WebhookGate = ((target: URL) => Promise<{ address: string } | { refused: string }>) | null;

/**
 * The egress address policy for a server that reaches the network directly (`wharf dev`, a
 * deployment run without isolation): loopback, private, link-local and metadata addresses are
 * refused unless the operator listed them in `WHARF_EGRESS_ALLOW_INTERNAL`; a name is resolved once
 * and the checked address is the one dialled. The egress code loads on the first webhook only.
 */
export function egressWebhookGate(settings: OutboundSettings): NonNullable<WebhookGate> {
  let policy: import("../../egress/index.ts").OutboundPolicy | null = null;
  return async (target) => {
    const egress = await import("../../egress/index.ts");
    policy ??= egress.outboundPolicy(settings);
    const verdict = await egress.checkOutboundUrl(policy, target);
    return "refused" in verdict ? { refused: `${verdict.refused} (${egress.REFUSAL_HINT})` } : verdict;
  };
}

/** What a run's webhook is told of it: the run with its status, output and times. */
export function endedRunPayload(run: Run, outcome: RunOutcome, startedAt: Date): Record<string, unknown> {
  return {
    ...run,
    status: outcome.status,
    values: outcome.values,
    error: outcome.error,
    run_started_at: startedAt.toISOString(),
    run_ended_at: nowIso(),
  };
}

/**
 * Tells the run's `webhook` URL that the run ended (POST of the run with its status and output).
 * A path (`/hooks/done`) is a route of this server (`selfUrl`), as on the LangGraph server: it goes
 * through the server's own authentication like any request without credentials. An absolute URL
 * goes through `gate` first.
 * Best effort: one attempt with a timeout; a failure is logged, never fails the run.
 */
export async function sendWebhook(
  log: Logger,
  url: string,
  payload: Record<string, unknown>,
  selfUrl: string | undefined,
  gate: WebhookGate,
): Promise<void> {
  let target: URL;
  try {
    if (isWebhookPath(url) && !selfUrl) throw new Error("a webhook path needs the server's own URL");
    target = isWebhookPath(url) ? new URL(url, selfUrl) : new URL(url);
    if (target.protocol !== "http:" && target.protocol !== "https:")
      throw new Error("only http and https webhooks are sent");
  } catch (err) {
    log.warn({ runId: payload.run_id, err }, "run webhook not sent: invalid URL");
    return;
  }
  try {
    let address: string | null = null;
    if (!isWebhookPath(url) && gate) {
      const verdict = await gate(target);
      if ("refused" in verdict) {
        log.warn(
          { runId: payload.run_id, host: target.host, reason: verdict.refused },
          "run webhook not sent: refused by the egress address policy",
        );
        return;
      }
      address = verdict.address;
    }
    const status = await post(
      target,
      address,
      toJson({ ...payload, webhook_sent_at: new Date().toISOString() }, false),
      10_000,
    );
    if (status < 200 || status > 299)
      log.warn({ runId: payload.run_id, status, host: target.host }, "run webhook answered with an error status");
  } catch (err) {
    log.warn({ runId: payload.run_id, host: target.host, err }, "run webhook failed");
  }
}

/** POSTs `body` to `target`, connecting to `address` when given (the checked one): the answer's status. */
function post(target: URL, address: string | null, body: string, timeoutMs: number): Promise<number> {
  const family = address ? net.isIP(address) : 0;
  // Node calls `lookup` for names only (a literal is the address it checked); `all` with autoSelectFamily.
  const lookup: net.LookupFunction | undefined = address
    ? (_host, opts, cb) =>
        opts.all
          ? (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [
              { address, family },
            ])
          : cb(null, address, family)
    : undefined;
  const request = target.protocol === "https:" ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const req = request(
      target,
      {
        method: "POST",
        headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) },
        lookup,
        timeout: timeoutMs,
        signal: AbortSignal.timeout(timeoutMs),
      },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on("timeout", () => req.destroy(new Error(`no answer in ${timeoutMs} ms`)));
    req.on("error", reject);
    req.end(body);
  });
}

/** A webhook given as a path of this server (`/x`, not the scheme-relative `//host/x`). */
export function isWebhookPath(url: string): boolean {
  return url.startsWith("/") && !url.startsWith("//") && !url.startsWith("/\\");
}
