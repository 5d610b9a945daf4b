import crypto from "node:crypto";
import http from "node:http";
import type { Readable } from "node:stream";
import { DROP_REQUEST, pairs, upstreamHeaders } from "./header-filter.ts";
import type { AuthorizeOutcome, ClientReply, ClientRequest, OutboundRequest, SandboxHandle } from "./types.ts";
import { ClientResponse } from "./http1/client-response.ts";
import { H1Pool } from "./http1/h1-upstream.ts";
import { H2Origin } from "./h2-upstream.ts";
import { hostForUrl, parseAuthority, type CanonicalHost } from "../policy/canonical-host.ts";
import { normalisePath } from "../policy/path-patterns.ts";
import type { InjectedHeader, SandboxPolicy } from "../policy/policy.ts";
import type { Target } from "./resolver.ts";
import type { EgressProxy } from "./egress-proxy.ts";

// One intercepted HTTP request: Host verification, access decision, injection, forwarding.

/**
 * Every request's handling is contained: an unexpected error answers that request 502 with a
 * request id (logged with it) and goes no further.
 */
export function onRequest(proxy: EgressProxy, req: ClientRequest, res: ClientReply): void {
  try {
    if (proxy.settings.faultHook && req.header("x-wharf-egress-fault") === "crash") injectCrash();
    handleRequest(proxy, req, res);
  } catch (err) {
    internalError(proxy, res, err);
  }
}

export function internalError(proxy: EgressProxy, res: ClientReply, err: unknown): void {
  const requestId = crypto.randomUUID();
  proxy.log?.error({ err, requestId }, "egress request failed unexpectedly");
  if (!res.headersSent)
    reply(proxy, res, 502, `egress: internal error (request id ${requestId})`, ["x-request-id", requestId]);
  else res.destroy();
}

export function handleRequest(proxy: EgressProxy, req: ClientRequest, res: ClientReply): void {
  const ctx = req.ctx;
  if (!ctx) return void res.destroy();
  proxy.stats.requests++;
  const sb = ctx.sandbox;
  let host: CanonicalHost;
  let port: number;
  let target = req.url;
  if (ctx.mode === "explicit") {
    // Absolute-form request to the proxy: the destination is the URL's authority.
    const m = /^http:\/\/([^/?#]*)(.*)$/i.exec(target);
    let a = m && ctx.lastAuthority?.text === m[1] ? ctx.lastAuthority.parsed : null;
    if (m && !a) {
      a = m[1].includes("@") ? null : parseAuthority(m[1], 80);
      if (a) ctx.lastAuthority = { text: m[1], parsed: a };
    }
    if (!m || !a) return reply(proxy, res, 400, "egress: the proxy accepts absolute http:// URLs and CONNECT only");
    host = a.host;
    port = a.port;
    target = m[2] === "" ? "/" : m[2].startsWith("?") ? `/${m[2]}` : m[2];
  } else {
    host = ctx.host!;
    port = ctx.port!;
    if (/^https?:\/\//i.test(target)) {
      const m = /^(https?):\/\/([^/?#]*)(.*)$/i.exec(target)!;
      const a = parseAuthority(m[2], ctx.tls ? 443 : 80);
      if (!a || a.host.kind !== host.kind || a.host.host !== host.host || a.port !== port)
        return misdirected(proxy, sb, res, req, host, port, "request target names another host");
      target = m[3] === "" ? "/" : m[3];
    }
  }
  // Every request's Host must name the verified destination (no domain fronting). Over HTTP/2 a
  // request may carry both Host and :authority: then both must (RFC 9113 §8.3.1).
  const authority = req.h2 ? req.header(":authority") : undefined;
  const hostHeader = req.header("host") ?? authority;
  const second = authority !== undefined && authority !== hostHeader ? authority : undefined;
  const verifiedKey =
    hostHeader === undefined
      ? undefined
      : (ctx.mode === "intercept" ? hostHeader : `${hostHeader}|${host.host}|${port}`) +
        (second === undefined ? "" : `|${second}`);
  if (verifiedKey === undefined || verifiedKey !== ctx.verifiedHost) {
    if (!namesDestination(hostHeader, host, port, ctx.tls))
      return misdirected(
        proxy,
        sb,
        res,
        req,
        host,
        port,
        `Host ${JSON.stringify(hostHeader ?? null)} does not match the destination`,
      );
    if (second !== undefined && !namesDestination(second, host, port, ctx.tls))
      return misdirected(
        proxy,
        sb,
        res,
        req,
        host,
        port,
        `:authority ${JSON.stringify(second)} does not match the destination`,
      );
    ctx.verifiedHost = verifiedKey;
  }
  const q = target.indexOf("?");
  const rawPath = q < 0 ? target : target.slice(0, q);
  const path = normalisePath(rawPath);
  if (path === null) return reply(proxy, res, 400, "egress: malformed request path");
  const query = q < 0 ? "" : target.slice(q);
  forward(proxy, req, res, sb, host, port, ctx.tls, path, query);
}

/** Does a Host or :authority value name this destination (default port by scheme)? */
function namesDestination(value: string | undefined, host: CanonicalHost, port: number, secure: boolean): boolean {
  const h = value === undefined ? null : parseAuthority(value, secure ? 443 : 80);
  return h !== null && h.host.kind === host.kind && h.host.host === host.host && h.port === port;
}

export function misdirected(
  proxy: EgressProxy,
  sb: SandboxHandle,
  res: ClientReply,
  req: ClientRequest,
  host: CanonicalHost,
  port: number,
  reason: string,
): void {
  proxy.audit(sb, { kind: "block", decision: "blocked", host: host.host, port, method: req.method, reason });
  reply(proxy, res, 421, `egress: ${reason}`);
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
function answer(res: ClientReply, status: number, headers: Record<string, string>, body: string): void {
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

/**
 * Decides, injects and forwards one request; the rules are read once, at its start. Synchronous
 * up to the upstream dispatch when the checked target is cached (the usual keep-alive case): no
 * promise per request.
 */
export function forward(
  proxy: EgressProxy,
  req: ClientRequest,
  res: ClientReply,
  sb: SandboxHandle,
  host: CanonicalHost,
  port: number,
  secure: boolean,
  path: string,
  query: string,
): void {
  const policy = sb.policy;
  if (sb.authorizers.length && !policy.isNoProxy(host)) {
    for (const a of sb.authorizers) {
      const local = a.answerLocally?.({
        method: req.method,
        host,
        port,
        secure,
        target: path + query,
        headers: pairs(req.rawHeaders),
      });
      if (!local) continue;
      req.discard();
      return answer(res, local.status, local.headers, local.body);
    }
  }
  const hit = proxy.targets.cached(sb, policy, host, port);
  if (hit) return decided(proxy, req, res, sb, policy, host, port, secure, path, query, hit);
  proxy.targets
    .check(sb, policy, host, port, policy.connectionVerdict(host, port))
    .then((target) => decided(proxy, req, res, sb, policy, host, port, secure, path, query, target))
    .catch((err) => internalError(proxy, res, err));
}

function decided(
  proxy: EgressProxy,
  req: ClientRequest,
  res: ClientReply,
  sb: SandboxHandle,
  policy: SandboxPolicy,
  host: CanonicalHost,
  port: number,
  secure: boolean,
  path: string,
  query: string,
  target: Target | { blocked: string },
): void {
  if ("blocked" in target) {
    proxy.stats.blocked++;
    proxy.audit(sb, {
      kind: "block",
      decision: "blocked",
      host: host.host,
      port,
      method: req.method,
      path,
      reason: target.blocked,
    });
    return reply(proxy, res, 403, `egress blocked: ${target.blocked}`, ["x-wharf-egress", "blocked"]);
  }
  const cred = credentialsFor(proxy, sb, policy, host, path);
  if (cred && cred.error) {
    proxy.audit(sb, {
      kind: "credential",
      decision: "failed",
      rule: cred.rule,
      host: host.host,
      port,
      method: req.method,
      path,
      reason: cred.error,
    });
    return reply(proxy, res, 502, `egress: credential for rule ${cred.rule} is unavailable`);
  }
  if (cred?.headers) {
    proxy.stats.injected++;
    proxy.audit(sb, {
      kind: "inject",
      decision: "injected",
      rule: cred.rule,
      host: host.host,
      port,
      method: req.method,
      path,
    });
  }
  const authority = port === (secure ? 443 : 80) ? hostForUrl(host) : `${hostForUrl(host)}:${port}`;
  const h2 = req.h2;
  const headers = upstreamHeaders(req, cred?.headers ?? null, authority, h2);
  if (sb.authorizers.length === 0 || policy.isNoProxy(host))
    return dispatchUpstream(
      proxy,
      req,
      res,
      sb,
      host,
      port,
      secure,
      h2,
      target,
      req.method,
      path,
      path + query,
      headers,
      req.body,
    );
  const out: OutboundRequest = {
    method: req.method,
    host,
    port,
    secure,
    target: path + query,
    headers: pairs(headers),
    body: req.body,
    staticRule: cred?.rule ?? null,
  };
  authorizeAndDispatch(proxy, req, res, sb, host, port, secure, h2, target, path, out).catch((err) =>
    internalError(proxy, res, err),
  );
}

/** Extensions run in order, each on the previous one's result; the last word is what is sent. */
async function authorizeAndDispatch(
  proxy: EgressProxy,
  req: ClientRequest,
  res: ClientReply,
  sb: SandboxHandle,
  host: CanonicalHost,
  port: number,
  secure: boolean,
  h2: boolean,
  target: Target,
  path: string,
  out: OutboundRequest,
): Promise<void> {
  for (const a of sb.authorizers) {
    let outcome: AuthorizeOutcome;
    try {
      outcome = await a.authorize(out);
    } catch (err) {
      proxy.audit(sb, {
        kind: "credential",
        decision: "failed",
        rule: a.name,
        host: host.host,
        port,
        method: req.method,
        path,
        reason: (err as Error).message.slice(0, 300),
      });
      return reply(proxy, res, 502, `egress: credential engine ${a.name} failed`);
    }
    if (outcome.action === "respond") return answer(res, outcome.status, outcome.headers, outcome.body);
    if (outcome.action === "forward") out = { ...out, headers: outcome.headers, body: outcome.body };
  }
  const flat: string[] = [];
  for (const [n, v] of out.headers) {
    const lower = n.toLowerCase();
    if (lower === "host" || !DROP_REQUEST.has(lower) || (h2 && lower === "te")) flat.push(n, v);
  }
  dispatchUpstream(proxy, req, res, sb, host, port, secure, h2, target, out.method, path, out.target, flat, out.body);
}

/**
 * Sends one request upstream and streams the answer back with backpressure, through the sandbox's
 * own pool for the checked address: HTTP/1.1 clients through the HTTP/1.1 client (`h1-upstream.ts`:
 * keep-alive, no pipelining, bodies framed by the client: a streamed body is chunked, a
 * Content-Length is checked); HTTP/2 clients over TLS through an origin offered HTTP/2 as well
 * (`h2-upstream.ts`: gRPC needs it end to end; a server that only knows HTTP/1.1 still works).
 */
export function dispatchUpstream(
  proxy: EgressProxy,
  req: ClientRequest,
  res: ClientReply,
  sb: SandboxHandle,
  host: CanonicalHost,
  port: number,
  secure: boolean,
  h2: boolean,
  target: Target,
  method: string,
  path: string,
  requestTarget: string,
  headers: string[],
  body: Readable | null,
): void {
  // The client left while the request was being decided: nothing goes upstream.
  if (res.gone) return;
  const sink = new ClientResponse(res, upstreamFailed, { proxy, sb, host, port, method, path } satisfies FailedRequest);
  const pool = h2 && secure ? h2OriginFor(proxy, sb, target, host) : h1PoolFor(proxy, sb, secure, target, host);
  sink.exchange = pool.request({ method, target: requestTarget, headers, body }, sink);
}

interface FailedRequest {
  proxy: EgressProxy;
  sb: SandboxHandle;
  host: CanonicalHost;
  port: number;
  method: string;
  path: string;
}

/** An upstream that could not be reached or answered badly: audited, 502 (or a cut answer). */
function upstreamFailed(res: ClientReply, err: Error & { code?: string }, f: FailedRequest): void {
  const code = err.code ?? err.name ?? "error";
  const verify = /CERT|SELF_SIGNED|UNABLE_TO|ERR_TLS/.test(code) || /certificate/i.test(err.message);
  f.proxy.audit(f.sb, {
    kind: "block",
    decision: "failed",
    host: f.host.host,
    port: f.port,
    method: f.method,
    path: f.path,
    reason: verify ? `upstream certificate rejected (${code})` : `upstream connection failed (${code})`,
  });
  if (!res.headersSent)
    reply(
      f.proxy,
      res,
      502,
      verify
        ? `egress: upstream certificate verification failed (${code})`
        : `egress: upstream connection failed (${code})`,
    );
  else res.destroy();
}

/** The sandbox's HTTP/1.1 pool for a checked address (and TLS name). */
function h1PoolFor(
  proxy: EgressProxy,
  sb: SandboxHandle,
  secure: boolean,
  target: Target,
  host: CanonicalHost,
): H1Pool {
  const servername = secure && host.kind === "name" ? host.host : "";
  const key = `${secure ? "s" : "p"}1|${target.address}|${target.port}|${servername}`;
  let pool = sb.pools.get(key) as H1Pool | undefined;
  if (!pool) {
    pool = new H1Pool({
      address: target.address,
      port: target.port,
      tls: secure ? { secureContext: proxy.upstreamContextFor(sb.policy), servername: servername || undefined } : null,
    });
    addPool(sb, key, pool);
  }
  return pool;
}

function addPool(sb: SandboxHandle, key: string, pool: H1Pool | H2Origin): void {
  if (sb.pools.size > 256) {
    const [oldKey, old] = sb.pools.entries().next().value!;
    sb.pools.delete(oldKey);
    void old.close();
  }
  sb.pools.set(key, pool);
}

/** The sandbox's HTTP/2-first origin for a checked address and TLS name. */
function h2OriginFor(proxy: EgressProxy, sb: SandboxHandle, target: Target, host: CanonicalHost): H2Origin {
  const servername = host.kind === "name" ? host.host : "";
  const key = `s2|${target.address}|${target.port}|${servername}`;
  let origin = sb.pools.get(key) as H2Origin | undefined;
  if (!origin) {
    origin = new H2Origin({
      address: target.address,
      port: target.port,
      tls: { secureContext: proxy.upstreamContextFor(sb.policy), servername: servername || undefined },
    });
    addPool(sb, key, origin);
  }
  return origin;
}

/** The headers to inject for this request (first matching header rule), or an unavailable credential. */
export function credentialsFor(
  proxy: EgressProxy,
  _sb: SandboxHandle,
  policy: SandboxPolicy,
  host: CanonicalHost,
  path: string,
): { rule: string; headers: InjectedHeader[] | null; error: string | null } | null {
  if (policy.isNoProxy(host)) return null;
  const rule = policy.headerRuleFor(host, path);
  if (!rule) return null;
  if (!rule.headers) return { rule: rule.name, headers: null, error: rule.problem ?? "unresolved" };
  return { rule: rule.name, headers: rule.headers, error: null };
}

/**
 * The operator's fault hook (`WHARF_EGRESS_FAULT_HOOK=1`, off by default): an exception thrown
 * outside any request's handling, as a bug in a library would, to prove a crash stays in the
 * data-plane process.
 */
function injectCrash(): void {
  setImmediate(() => {
    throw new Error("egress fault hook: injected crash");
  });
}
