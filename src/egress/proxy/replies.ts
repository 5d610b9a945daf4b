import crypto from "node:crypto";
import http from "node:http";
import type { ClientReply } from "./types.ts";
import type { EgressProxy } from "./egress-proxy.ts";
import type { RequestContext } from "./request-context.ts";

// The answers the proxy makes itself on the request path: refusals, local answers, internal errors.

export function internalError(proxy: EgressProxy, res: ClientReply, err: unknown): void {
  const requestId = crypto.randomUUID();
  proxy.log?.error({ err, requestId }, "egress request failed unexpectedly");
  if (!res.headersSent)
    reply(proxy, res, 502, `egress: internal error (request id ${requestId})`, ["x-request-id", requestId]);
  else res.destroy();
}

/** A request whose target or Host names another destination than the verified one: audited, 421. */
export function misdirected(rc: RequestContext, reason: string): void {
  rc.decide("block", "blocked", undefined, reason);
  reply(rc.proxy, rc.res, 421, `egress: ${reason}`);
}

export function reply(_proxy: EgressProxy, res: ClientReply, status: number, text: string, extra: string[] = []): void {
  if (res.headersSent) return void res.destroy();
  const body = text + "\n";
  res.writeHead(status, http.STATUS_CODES[status] ?? "", [
    "content-type",
    "text/plain; charset=utf-8",
    "content-length",
    String(Buffer.byteLength(body)),
    ...extra,
  ]);
  res.end(body);
}

/**
 * An answer made here (an engine's local or final word), nothing from upstream. Its headers may come
 * from a callback service: one that could not go on the wire (a bad name, CR/LF in a value) is left
 * out, the answer still goes.
 */
export function answer(res: ClientReply, status: number, headers: Record<string, string>, body: string): void {
  if (res.headersSent) return void res.destroy();
  const flat: string[] = [];
  for (const [n, v] of Object.entries(headers))
    if (n.toLowerCase() !== "content-length" && validHeader(n, String(v))) flat.push(n, String(v));
  flat.push("content-length", String(Buffer.byteLength(body)));
  res.writeHead(status, http.STATUS_CODES[status] ?? "", flat);
  res.end(body);
}

function validHeader(name: string, value: string): boolean {
  try {
    http.validateHeaderName(name);
    http.validateHeaderValue(name, value);
    return true;
  } catch {
    // Refused by Node's own rules for outgoing headers: not sent.
    return false;
  }
}
