import type http from "node:http";
import type { InjectedHeader } from "../policy/policy.ts";
import type { ClientRequest } from "./types.ts";

/** Request headers never forwarded: hop-by-hop, proxy-only, and those the proxy sets itself. */
export const DROP_REQUEST = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "proxy-authenticate",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "expect",
  "http2-settings",
]);
export const DROP_RESPONSE = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "transfer-encoding",
  "upgrade",
  "trailer",
]);

export function pairs(raw: string[]): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  for (let i = 0; i < raw.length; i += 2) out.push([raw[i], raw[i + 1]]);
  return out;
}

/**
 * The headers sent upstream: the client's, minus hop-by-hop ones, minus those named in its
 * `Connection` header, minus every client copy of an injected header (the injected value replaces
 * it), then `Host` set to the verified destination and the injected headers appended. Body framing
 * is the upstream client's job (undici sends a streamed body chunked whatever the method), so
 * stripping `Transfer-Encoding` can never turn a body into a smuggled second request.
 */
export function upstreamHeaders(
  req: ClientRequest,
  injected: InjectedHeader[] | null,
  authority: string,
  h2 = false,
): string[] {
  const raw = req.rawHeaders;
  const out: string[] = ["Host", authority];
  let connTokens: Set<string> | null = null;
  const conn = req.header("connection");
  if (conn)
    connTokens = new Set(
      conn
        .toLowerCase()
        .split(",")
        .map((s) => s.trim()),
    );
  let injectedNames: Set<string> | null = null;
  if (injected) injectedNames = new Set(injected.map((h) => h.lower));
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i].toLowerCase();
    // HTTP/2 pseudo-headers are rebuilt upstream; `te: trailers` is how gRPC says it reads trailers.
    if (h2 && (lower.charCodeAt(0) === 58 || (lower === "te" && raw[i + 1].trim().toLowerCase() === "trailers"))) {
      if (lower === "te") out.push("te", "trailers");
      continue;
    }
    if (DROP_REQUEST.has(lower) || connTokens?.has(lower) || injectedNames?.has(lower)) continue;
    out.push(raw[i], raw[i + 1]);
  }
  if (injected) for (const h of injected) out.push(h.name, h.value);
  return out;
}

/** Flat name/value pairs as an object (repeats become arrays), for HTTP/2 responses. */
export function headerObject(flat: string[]): http.OutgoingHttpHeaders {
  const out: Record<string, string | string[]> = {};
  for (let i = 0; i < flat.length; i += 2) {
    const name = flat[i].toLowerCase();
    const prev = out[name];
    out[name] = prev === undefined ? flat[i + 1] : Array.isArray(prev) ? [...prev, flat[i + 1]] : [prev, flat[i + 1]];
  }
  return out;
}

export function responseHeaders(raw: string[]): string[] {
  const out: string[] = [];
  let connTokens: Set<string> | null = null;
  for (let i = 0; i < raw.length; i += 2) {
    if (raw[i].length !== 10 || raw[i].toLowerCase() !== "connection") continue;
    // The usual `keep-alive` or `close` names no header of its own (and both are dropped anyway).
    const value = raw[i + 1].trim().toLowerCase();
    if (value !== "keep-alive" && value !== "close") connTokens = new Set(value.split(",").map((s) => s.trim()));
  }
  for (let i = 0; i < raw.length; i += 2) {
    const lower = raw[i].toLowerCase();
    if (DROP_RESPONSE.has(lower) || connTokens?.has(lower)) continue;
    out.push(raw[i], raw[i + 1]);
  }
  return out;
}
