import { DROP_REQUEST, pairs, upstreamHeaders } from "./header-filter.ts";
import type { AuthorizeOutcome, ClientReply, ClientRequest, OutboundRequest, SandboxHandle } from "./types.ts";
import { hostForUrl, parseAuthority, type CanonicalHost } from "../policy/canonical-host.ts";
import { normalisePath } from "../policy/path-patterns.ts";
import type { SandboxPolicy } from "../policy/policy.ts";
import type { Target } from "./resolver.ts";
import type { EgressProxy } from "./egress-proxy.ts";
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
 * The operator's fault hook (`WHARF_EGRESS_FAULT_HOOK=1`, off by default): an exception thrown
 * outside any request's handling, as a bug in a library would, to prove a crash stays in the
 * data-plane process.
 */
function injectCrash(): void {
  setImmediate(() => {
    throw new Error("egress fault hook: injected crash");
  });
}
