import { DROP_REQUEST, pairs, upstreamHeaders } from "./header-filter.ts";
import type { AuthorizeOutcome, ClientReply, ClientRequest, OutboundRequest } from "./types.ts";
import { hostForUrl, parseAuthority, type CanonicalHost } from "../policy/canonical-host.ts";
import { normalisePath } from "../policy/path-patterns.ts";
import type { Target } from "./resolver.ts";
import type { EgressProxy } from "./egress-proxy.ts";
import { RequestContext } from "./request-context.ts";
import { answer, internalError, misdirected, reply } from "./replies.ts";
import { credentialsFor } from "./static-credentials.ts";
import { dispatchUpstream } from "./upstream-dispatch.ts";

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

export function handleRequest(proxy: EgressProxy, req: ClientRequest, res: ClientReply): void {
  const conn = req.ctx;
  if (!conn) return void res.destroy();
  proxy.stats.requests++;
  const rc = new RequestContext(proxy, req, res, conn);
  const target = destinationOf(rc);
  if (target === null || !hostVerified(rc)) return;
  const q = target.indexOf("?");
  const rawPath = q < 0 ? target : target.slice(0, q);
  const path = normalisePath(rawPath);
  if (path === null) return reply(proxy, res, 400, "egress: malformed request path");
  rc.path = path;
  rc.query = q < 0 ? "" : target.slice(q);
  forward(rc);
}

/**
 * Sets the request's destination (`host`, `port`) and returns its origin-form target, or answers
 * the request and returns null.
 */
function destinationOf(rc: RequestContext): string | null {
  const { conn, req } = rc;
  const target = req.url;
  if (conn.mode === "explicit") {
    // Absolute-form request to the proxy: the destination is the URL's authority.
    const m = /^http:\/\/([^/?#]*)(.*)$/i.exec(target);
    let a = m && conn.lastAuthority?.text === m[1] ? conn.lastAuthority.parsed : null;
    if (m && !a) {
      a = m[1].includes("@") ? null : parseAuthority(m[1], 80);
      if (a) conn.lastAuthority = { text: m[1], parsed: a };
    }
    if (!m || !a) {
      reply(rc.proxy, rc.res, 400, "egress: the proxy accepts absolute http:// URLs and CONNECT only");
      return null;
    }
    rc.host = a.host;
    rc.port = a.port;
    return m[2] === "" ? "/" : m[2].startsWith("?") ? `/${m[2]}` : m[2];
  }
  rc.host = conn.host!;
  rc.port = conn.port!;
  if (!/^https?:\/\//i.test(target)) return target;
  const m = /^(https?):\/\/([^/?#]*)(.*)$/i.exec(target)!;
  const a = parseAuthority(m[2], conn.tls ? 443 : 80);
  if (!a || a.host.kind !== rc.host.kind || a.host.host !== rc.host.host || a.port !== rc.port) {
    misdirected(rc, "request target names another host");
    return null;
  }
  return m[3] === "" ? "/" : m[3];
}

/**
 * Every request's Host must name the verified destination (no domain fronting). Over HTTP/2 a
 * request may carry both Host and :authority: then both must (RFC 9113 §8.3.1). A misdirected
 * request is answered here (false).
 */
function hostVerified(rc: RequestContext): boolean {
  const { conn, req } = rc;
  const authority = req.h2 ? req.header(":authority") : undefined;
  const hostHeader = req.header("host") ?? authority;
  const second = authority !== undefined && authority !== hostHeader ? authority : undefined;
  const verifiedKey =
    hostHeader === undefined
      ? undefined
      : (conn.mode === "intercept" ? hostHeader : `${hostHeader}|${rc.host.host}|${rc.port}`) +
        (second === undefined ? "" : `|${second}`);
  if (verifiedKey !== undefined && verifiedKey === conn.verifiedHost) return true;
  if (!namesDestination(hostHeader, rc.host, rc.port, conn.tls)) {
    misdirected(rc, `Host ${JSON.stringify(hostHeader ?? null)} does not match the destination`);
    return false;
  }
  if (second !== undefined && !namesDestination(second, rc.host, rc.port, conn.tls)) {
    misdirected(rc, `:authority ${JSON.stringify(second)} does not match the destination`);
    return false;
  }
  conn.verifiedHost = verifiedKey;
  return true;
}

/** Does a Host or :authority value name this destination (default port by scheme)? */
function namesDestination(value: string | undefined, host: CanonicalHost, port: number, secure: boolean): boolean {
  const h = value === undefined ? null : parseAuthority(value, secure ? 443 : 80);
  return h !== null && h.host.kind === host.kind && h.host.host === host.host && h.port === port;
}

/**
 * Decides, injects and forwards one request; the rules are read once, at its start (the
 * context's `policy`). Synchronous up to the upstream dispatch when the checked target is cached
 * (the usual keep-alive case): no promise per request.
 */
export function forward(rc: RequestContext): void {
  const { proxy, sandbox: sb, policy, host, port } = rc;
  if (sb.authorizers.length && !policy.isNoProxy(host) && answeredLocally(rc)) return;
  const hit = proxy.targets.cached(sb, policy, host, port);
  if (hit) return decided(rc, hit);
  proxy.targets
    .check(sb, policy, host, port, policy.connectionVerdict(host, port))
    .then((target) => decided(rc, target))
    .catch((err) => internalError(proxy, rc.res, err));
}

/** An engine that answers this request itself (before access control: nothing leaves the proxy). */
function answeredLocally(rc: RequestContext): boolean {
  const { req } = rc;
  for (const a of rc.sandbox.authorizers) {
    const local = a.answerLocally?.({
      method: req.method,
      host: rc.host,
      port: rc.port,
      secure: rc.secure,
      target: rc.path + rc.query,
      headers: pairs(req.rawHeaders),
    });
    if (!local) continue;
    rc.decision = "answered";
    req.discard();
    answer(rc.res, local.status, local.headers, local.body);
    return true;
  }
  return false;
}

function decided(rc: RequestContext, target: Target | { blocked: string }): void {
  const { proxy, req, sandbox: sb, policy, host, port } = rc;
  if ("blocked" in target) {
    proxy.stats.blocked++;
    rc.decide("block", "blocked", undefined, target.blocked);
    return reply(proxy, rc.res, 403, `egress blocked: ${target.blocked}`, ["x-wharf-egress", "blocked"]);
  }
  rc.target = target;
  if (!headerRuleApplied(rc)) return;
  const authority = port === (rc.secure ? 443 : 80) ? hostForUrl(host) : `${hostForUrl(host)}:${port}`;
  const headers = upstreamHeaders(req, rc.injected, authority, rc.h2);
  if (sb.authorizers.length === 0 || policy.isNoProxy(host))
    return dispatchUpstream(rc, { method: req.method, target: rc.path + rc.query, headers, body: req.body });
  const out: OutboundRequest = {
    method: req.method,
    host,
    port,
    secure: rc.secure,
    target: rc.path + rc.query,
    headers: pairs(headers),
    body: req.body,
    staticRule: rc.injected ? rc.rule : null,
  };
  authorizeAndDispatch(rc, out).catch((err) => internalError(proxy, rc.res, err));
}

/** The first matching static header rule: its values to inject, or its credential unavailable (502, false). */
function headerRuleApplied(rc: RequestContext): boolean {
  const cred = credentialsFor(rc.policy, rc.host, rc.path);
  if (cred && cred.error) {
    rc.decide("credential", "failed", cred.rule, cred.error);
    reply(rc.proxy, rc.res, 502, `egress: credential for rule ${cred.rule} is unavailable`);
    return false;
  }
  if (cred?.headers) {
    rc.proxy.stats.injected++;
    rc.injected = cred.headers;
    rc.decide("inject", "injected", cred.rule);
  } else rc.decision = "allowed";
  return true;
}

/** Extensions run in order, each on the previous one's result; the last word is what is sent. */
async function authorizeAndDispatch(rc: RequestContext, out: OutboundRequest): Promise<void> {
  for (const a of rc.sandbox.authorizers) {
    let outcome: AuthorizeOutcome;
    try {
      outcome = await a.authorize(out);
    } catch (err) {
      rc.decide("credential", "failed", a.name, (err as Error).message.slice(0, 300));
      return reply(rc.proxy, rc.res, 502, `egress: credential engine ${a.name} failed`);
    }
    if (outcome.action === "respond") {
      rc.decision = "answered";
      return answer(rc.res, outcome.status, outcome.headers, outcome.body);
    }
    if (outcome.action === "forward") out = { ...out, headers: outcome.headers, body: outcome.body };
  }
  const flat: string[] = [];
  for (const [n, v] of out.headers) {
    const lower = n.toLowerCase();
    if (lower === "host" || !DROP_REQUEST.has(lower) || (rc.h2 && lower === "te")) flat.push(n, v);
  }
  dispatchUpstream(rc, { method: out.method, target: out.target, headers: flat, body: out.body });
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
