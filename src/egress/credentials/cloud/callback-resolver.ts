import { auditUrl, noAudit, type CloudAuditSink } from "./cloud-audit.ts";
import { callbackHeadersProblem } from "./callback-headers.ts";

/**
 * Credential callbacks (the interface's "Callbacks"): on a cache miss for a host a callback
 * matches, POST `url` with `Content-Type: application/json`, the configured request headers
 * verbatim and `{"host": …, "port": …}`; a 2xx JSON object whose `headers` maps names to strings
 * is injected and cached for `ttl_seconds` per canonical host:port. Anything else fails closed
 * with `CallbackResolutionError` (the proxy answers 502 `callback resolution failed`) and caches
 * nothing. Concurrent misses for one host:port share one callback request.
 *
 * Host matching, "static rules win" and "first matching callback wins" are the proxy's: it passes
 * the callback it chose. The callback is reached with the `fetch` the proxy supplies (its own
 * dispatcher, applying the operator's address classification), never through a sandbox's path.
 */
export interface CallbackSpec {
  url: string;
  /** The configured request headers with their values resolved (plaintext as given, opaque unsealed). */
  requestHeaders: Array<{ name: string; value: string }>;
  ttlSeconds: number;
}

export type CallbackFetch = (
  url: string,
  init: { method: string; headers: Record<string, string>; body: string; redirect: "manual"; signal: AbortSignal },
) => Promise<Response>;

export interface CallbackResolverOptions {
  fetch?: CallbackFetch;
  /** Whole callback exchange (connect, answer, body); default 5 s. */
  timeoutMs?: number;
  /** Largest callback answer read; default 64 KiB. */
  maxResponseBytes?: number;
  /** Cache entries kept per callback (oldest evicted first); default 10,000. */
  maxCacheEntries?: number;
  audit?: CloudAuditSink;
  now?: () => number;
}

export type CallbackFailureReason =
  "status" | "transport" | "timeout" | "malformed_json" | "invalid_headers" | "too_large";

/** The proxy turns this into `502` with message `callback resolution failed` (`publicMessage`). */
export class CallbackResolutionError extends Error {
  readonly status = 502;
  readonly publicMessage = "callback resolution failed";
  constructor(
    readonly reason: CallbackFailureReason,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`callback resolution failed: ${detail}`, options);
    this.name = "CallbackResolutionError";
  }
}

interface CacheEntry {
  headers: Record<string, string>;
  expiresAt: number;
}

export class CallbackResolver {
  private readonly caches = new WeakMap<CallbackSpec, Map<string, CacheEntry>>();
  private readonly inflight = new WeakMap<CallbackSpec, Map<string, Promise<Record<string, string>>>>();
  private readonly fetchFn: CallbackFetch;
  private readonly timeoutMs: number;
  private readonly maxResponseBytes: number;
  private readonly maxEntries: number;
  private readonly audit: CloudAuditSink;
  private readonly now: () => number;

  constructor(options: CallbackResolverOptions = {}) {
    this.fetchFn = options.fetch ?? ((url, init) => fetch(url, init));
    this.timeoutMs = options.timeoutMs ?? 5000;
    this.maxResponseBytes = options.maxResponseBytes ?? 64 * 1024;
    this.maxEntries = options.maxCacheEntries ?? 10_000;
    this.audit = options.audit ?? noAudit;
    this.now = options.now ?? Date.now;
  }

  /**
   * Headers to inject for `host:port` (the proxy's canonical destination). The cache belongs to
   * the `spec` object: a PATCH that installs new callback objects starts from an empty cache.
   */
  async resolve(spec: CallbackSpec, host: string, port: number): Promise<Record<string, string>> {
    const key = `${host}:${port}`;
    const callbackUrl = auditUrl(spec.url);
    const cache = this.mapFor(this.caches, spec);
    const hit = cache.get(key);
    if (hit && hit.expiresAt > this.now()) {
      this.audit({ kind: "callback_cache", host, port, callbackUrl, cache: "hit" });
      return { ...hit.headers };
    }
    if (hit) cache.delete(key);
    const pending = this.mapFor(this.inflight, spec);
    const shared = pending.get(key);
    if (shared) {
      this.audit({ kind: "callback_cache", host, port, callbackUrl, cache: "shared" });
      return { ...(await shared) };
    }
    this.audit({ kind: "callback_cache", host, port, callbackUrl, cache: "miss" });
    const call = this.call(spec, host, port).then((headers) => {
      cache.set(key, { headers, expiresAt: this.now() + spec.ttlSeconds * 1000 });
      while (cache.size > this.maxEntries) cache.delete(cache.keys().next().value as string);
      return headers;
    });
    pending.set(key, call);
    try {
      return { ...(await call) };
    } finally {
      pending.delete(key);
    }
  }

  /** Drops every cached answer of `spec` (e.g. when its config is replaced in place). */
  forget(spec: CallbackSpec): void {
    this.caches.delete(spec);
  }

  private mapFor<V>(store: WeakMap<CallbackSpec, Map<string, V>>, spec: CallbackSpec): Map<string, V> {
    let map = store.get(spec);
    if (!map) {
      map = new Map();
      store.set(spec, map);
    }
    return map;
  }

  private async call(spec: CallbackSpec, host: string, port: number): Promise<Record<string, string>> {
    const started = performance.now();
    const callbackUrl = auditUrl(spec.url);
    let status: number | null = null;
    const fail = (reason: CallbackFailureReason, detail: string, cause?: unknown): never => {
      this.audit({
        kind: "callback_call",
        host,
        port,
        callbackUrl,
        status,
        latencyMs: performance.now() - started,
        outcome: "error",
        reason,
      });
      throw new CallbackResolutionError(reason, detail, cause === undefined ? undefined : { cause });
    };
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), this.timeoutMs);
    try {
      const headers: Record<string, string> = { "content-type": "application/json" };
      for (const h of spec.requestHeaders) headers[h.name] = h.value;
      let response: Response;
      try {
        response = await this.fetchFn(spec.url, {
          method: "POST",
          headers,
          body: JSON.stringify({ host, port }),
          redirect: "manual",
          signal: controller.signal,
        });
      } catch (err) {
        return fail(
          controller.signal.aborted ? "timeout" : "transport",
          controller.signal.aborted
            ? `no answer within ${this.timeoutMs} ms`
            : `transport error (${(err as Error)?.message ?? err})`,
          err,
        );
      }
      status = response.status;
      if (status < 200 || status > 299) {
        await response.body?.cancel().catch(() => undefined); // releasing the connection; the answer is already decided
        return fail("status", `callback answered ${status}`);
      }
      let text: string;
      try {
        text = await readLimited(response, this.maxResponseBytes);
      } catch (err) {
        if (err instanceof TooLarge)
          return fail("too_large", `callback answer larger than ${this.maxResponseBytes} bytes`, err);
        return fail(
          controller.signal.aborted ? "timeout" : "transport",
          controller.signal.aborted
            ? `no complete answer within ${this.timeoutMs} ms`
            : "transport error while reading the answer",
          err,
        );
      }
      const answer = headersOfAnswer(text);
      if ("problem" in answer) return fail(answer.reason, answer.problem, answer.cause);
      const resolved = answer.headers;
      this.audit({
        kind: "callback_call",
        host,
        port,
        callbackUrl,
        status,
        latencyMs: performance.now() - started,
        outcome: "ok",
        headerNames: Object.keys(resolved).map((n) => n.toLowerCase()),
      });
      return resolved;
    } finally {
      clearTimeout(timer);
    }
  }
}

class TooLarge extends Error {}

/** The headers a callback answered with, or what is wrong with its answer. */
function headersOfAnswer(
  text: string,
): { headers: Record<string, string> } | { reason: CallbackFailureReason; problem: string; cause?: unknown } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    return { reason: "malformed_json", problem: "callback answer is not JSON", cause: err };
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed))
    return { reason: "malformed_json", problem: "callback answer is not a JSON object" };
  const problem = callbackHeadersProblem((parsed as { headers?: unknown }).headers);
  if (problem) return { reason: "invalid_headers", problem };
  return { headers: { ...(parsed as { headers: Record<string, string> }).headers } };
}

async function readLimited(response: Response, max: number): Promise<string> {
  if (!response.body) return "";
  const reader = response.body.getReader();
  const parts: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    size += value.byteLength;
    if (size > max) {
      await reader.cancel().catch(() => undefined); // releasing the connection; the answer is already decided
      throw new TooLarge();
    }
    parts.push(value);
  }
  return Buffer.concat(parts).toString("utf8");
}
