import http from "node:http";
import { Readable } from "node:stream";
import { RESPONSE_ALREADY_SENT } from "@hono/node-server/utils/response";
import type { Context, Hono } from "hono";
import type { AppEnv } from "../../http/principal.ts";
import type { LiveRevision } from "../rollout/live-revision.ts";
import type { Authenticate } from "../../http/authenticate.ts";
import { HttpError } from "../../http/errors.ts";
import {
  allowedSetCookies,
  CONSOLE_ORIGIN_CONTENT_HEADERS,
  parseTenantHost,
  withoutPlatformCookies,
} from "../../http/tenant-hosts.ts";
import type { RolloutEngine } from "../rollout/rollout-engine.ts";
import type { Route, RouteAccess } from "../rollout/route-cache.ts";
import { UUIDISH } from "./schemas.ts";
import { encodePrincipal, PRINCIPAL_HEADER } from "../runtime/principal-header.ts";
import type { Principal } from "../../http/principal.ts";
import { PLATFORM_ONLY_HEADERS, platformCredentialHeaders } from "./forwarded-credentials.ts";
import { sendUpstream } from "./upstream.ts";
import { upstreamFailure } from "./upstream-failure.ts";
import type { Logger } from "../../log/logger.ts";

/** Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
]);

/**
 * @hono/node-server's answer for "the handler wrote the Node response itself". It must be a real
 * `Response`: one made after the server replaced the global `Response` with its own light class
 * (which it writes out from its cache without looking at this marker) would answer twice.
 */
const alreadySentUsable = !Object.getOwnPropertySymbols(RESPONSE_ALREADY_SENT).some((s) => s.description === "cache");

/**
 * The proxy's shortcuts past web streams, each on by default. `bench/deployments-rollout.ts` turns
 * them off one by one to print what each buys, measured in the same run.
 */
export const proxyTuning = { pipeResponses: true, nodeSignals: true };

/** Answered by the agent server without credentials. */
const PUBLIC_PATHS = new Set(["/ok", "/info"]);

function problem(status: number, detail: string): Response {
  return new Response(JSON.stringify({ detail }), {
    status,
    headers: { "content-type": "application/json", ...(status === 503 ? { "retry-after": "1" } : {}) },
  });
}

interface Upstream {
  res: http.IncomingMessage;
  done: () => void;
}

/**
 * The agent server's response headers for the client: hop-by-hop ones dropped, locations kept under
 * the stable URL (`prefix`, empty on the deployment's own host). On the console's origin the
 * deployment's bytes get an opaque origin and set no cookie; elsewhere they never set the platform's.
 */
export function responseHeaders(
  upstream: http.IncomingHttpHeaders,
  prefix: string,
  onConsoleOrigin: boolean,
): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(upstream)) {
    if (v === undefined || HOP_BY_HOP.has(k) || k === "set-cookie") continue;
    // Locations the agent server gives relative to its root stay under the stable URL.
    const fix = (s: string) => ((k === "location" || k === "content-location") && s.startsWith("/") ? prefix + s : s);
    out[k] = Array.isArray(v) ? v.map(fix) : fix(v);
  }
  const cookies = allowedSetCookies(upstream["set-cookie"] ?? [], onConsoleOrigin);
  if (cookies.length) out["set-cookie"] = cookies;
  if (onConsoleOrigin) Object.assign(out, CONSOLE_ORIGIN_CONTENT_HEADERS);
  return out;
}

/** Thrown when a request body passes the platform's body limit. */
class BodyTooLarge extends Error {}

/**
 * The request body, whole, within the platform's body limit. The stable URL applies the limit
 * itself (the feature lists it among the streamed bodies the app-wide limiter skips: that limiter
 * looks at `c.req.raw.body`, which makes @hono/node-server build a whole Fetch `Request` with a
 * body stream per call). A Content-Length past the limit is refused unread; otherwise
 * `arrayBuffer()` takes @hono/node-server's path that reads the Node request directly. A chunked
 * body is counted as it comes.
 */
async function requestBody(c: Context<AppEnv>, limit: number): Promise<Buffer> {
  const length = c.req.header("content-length");
  if (length !== undefined && !c.req.header("transfer-encoding")) {
    if (Number(length) > limit) throw new BodyTooLarge();
    return Buffer.from(await c.req.arrayBuffer());
  }
  const chunks: Uint8Array[] = [];
  let size = 0;
  const reader = c.req.raw.body?.getReader();
  for (;;) {
    const next = await reader?.read();
    if (!next || next.done) break;
    size += next.value.length;
    if (size > limit) {
      await reader?.cancel();
      throw new BodyTooLarge();
    }
    chunks.push(next.value);
  }
  return Buffer.concat(chunks);
}

/**
 * Aborts when the client goes away before its response is complete. From the Node response when
 * there is one: `c.req.raw.signal` would make @hono/node-server build a whole Fetch `Request`
 * (headers, body stream, signal) for every proxied call just to watch the connection.
 */
function clientGone(c: Context<AppEnv>): AbortSignal {
  const outgoing = proxyTuning.nodeSignals ? nodeResponseOf(c) : null;
  if (!outgoing) return c.req.raw.signal;
  const controller = new AbortController();
  outgoing.once("close", () => {
    if (!outgoing.writableFinished) controller.abort();
  });
  return controller.signal;
}

/** The Node response under the Hono context, when the app is served by @hono/node-server (not in `app.request`). */
function nodeResponseOf(c: Context<AppEnv>): http.ServerResponse | null {
  const env = c.env as { outgoing?: unknown } | undefined;
  return env?.outgoing instanceof http.ServerResponse ? env.outgoing : null;
}

/**
 * Writes the agent server's response straight to the client's socket. A web `Response` around a
 * Node stream costs a stream conversion per chunk and, in @hono/node-server, a timer tick while it
 * probes whether the body is already complete; piping keeps SSE frames unbuffered all the same.
 * Hono is told the response is already sent.
 */
function pipeToClient(
  res: http.IncomingMessage,
  outgoing: http.ServerResponse,
  status: number,
  headers: http.OutgoingHttpHeaders,
  bodyless: boolean,
): Response {
  outgoing.writeHead(status, headers);
  if (bodyless) {
    res.resume();
    outgoing.end();
  } else {
    res.pipe(outgoing);
    // The upstream failing midway cuts the client's response short (never a truncated body that looks whole).
    res.once("error", () => outgoing.destroy());
    res.once("aborted", () => outgoing.destroy());
    // The client leaving stops the upstream request (the agent server applies on_disconnect).
    outgoing.once("close", () => {
      if (!res.complete) res.destroy();
    });
  }
  return RESPONSE_ALREADY_SENT;
}

/**
 * The stable URL of every deployment: `/deployments/{id}/…` is forwarded to the agent server of
 * the deployment's live revision. Responses stream through as they come (SSE is never buffered);
 * each request counts as in flight on its revision until its response ends, so a replaced revision
 * finishes what it started before it stops. Request bodies (small JSON for agent servers, capped
 * by the platform's body limit) are read first so a request refused by a server that just stopped
 * can be sent again to the new one.
 */
export function mountDeploymentProxy(
  app: Hono<AppEnv>,
  engine: () => RolloutEngine,
  authenticate: Authenticate,
  tenantDomain: string,
  log: Logger,
): void {
  const deps: ProxyDeps = { engine, authenticate, tenantDomain, log };
  const handler = (c: Context<AppEnv>): Promise<Response> => proxyRequest(deps, c);
  app.all("/deployments/:deployment_id", handler);
  app.all("/deployments/:deployment_id/*", handler);
}

interface ProxyDeps {
  engine: () => RolloutEngine;
  authenticate: Authenticate;
  tenantDomain: string;
  log: Logger;
}

/** A request to the upstream, as the retries send it again. */
interface Outgoing {
  id: string;
  rest: string;
  search: string;
  method: string;
  headers: http.OutgoingHttpHeaders;
  body: Buffer | null;
  signal: AbortSignal;
}

/**
 * Without custom auth the agent server accepts any platform key; the stable URL narrows that to
 * keys of the deployment's own workspace (another workspace's key reads as "not found", as on the
 * control plane). With custom auth the project's handler decides, as on LangSmith Deployment.
 */
async function admit(
  authenticate: Authenticate,
  c: Context<AppEnv>,
  id: string,
  route: RouteAccess,
  rest: string,
): Promise<Response | Principal | null> {
  if (PUBLIC_PATHS.has(rest)) return null;
  const headers = c.req.raw.headers;
  if (route.customAuth) {
    // The project's handler decides; a developer (Studio) request with a platform credential of
    // the deployment's workspace is passed on as that caller.
    if (headers.get("x-auth-scheme") !== "langsmith" || !(headers.get("x-api-key") || headers.get("authorization")))
      return null;
    const principal = await authenticate(headers).catch(() => null);
    return principal && principal.workspaceId === route.workspaceId ? principal : null;
  }
  try {
    const principal = await authenticate(headers);
    return principal.workspaceId === route.workspaceId ? principal : problem(404, `Deployment ID ${id} not found.`);
  } catch (err) {
    if (err instanceof HttpError)
      return new Response(JSON.stringify({ detail: err.detail }), {
        status: err.status,
        headers: { "content-type": "application/json", ...err.headers },
      });
    throw err;
  }
}

async function proxyRequest(d: ProxyDeps, c: Context<AppEnv>): Promise<Response> {
  const id = c.req.param("deployment_id") ?? "";
  if (!UUIDISH.test(id)) return problem(404, `Deployment ID ${id} not found.`);
  const prefix = `/deployments/${id}`;
  const incoming = new URL(c.req.url);
  const rest = incoming.pathname.slice(prefix.length) || "/";
  // On the deployment's own host (`dep-{id}.{tenant domain}`) its routes start at the root.
  const host = parseTenantHost(c.req.header("host"), d.tenantDomain);
  const ownHost = host !== null && host !== "unknown" && host.kind === "deployment";
  const clientPrefix = ownHost ? "" : prefix;
  const method = c.req.method;
  let body: Buffer | null = null;
  if (method !== "GET" && method !== "HEAD") {
    const limit = d.engine().bodyLimitBytes;
    try {
      body = await requestBody(c, limit);
    } catch (err) {
      if (err instanceof BodyTooLarge) return problem(413, `Request body too large: the limit is ${limit} bytes`);
      throw err;
    }
  }
  const headers = forwardedHeaders(c, incoming, clientPrefix, body);
  const signal = clientGone(c);
  const out: Outgoing = { id, rest, search: incoming.search, method, headers, body, signal };
  const upstream = await sendToRevision(d, c, out);
  if (upstream instanceof Response) return upstream;
  return answer(c, upstream, method, clientPrefix, ownHost);
}

/** The request's headers as the agent server gets them: no hop-by-hop or platform-only ones. */
function forwardedHeaders(
  c: Context<AppEnv>,
  incoming: URL,
  clientPrefix: string,
  body: Buffer | null,
): http.OutgoingHttpHeaders {
  const headers: http.OutgoingHttpHeaders = {};
  c.req.raw.headers.forEach((v, k) => {
    if (HOP_BY_HOP.has(k) || k === PRINCIPAL_HEADER || PLATFORM_ONLY_HEADERS.has(k)) return;
    // The console's session cookie is the platform's credential: the agent server never sees it.
    if (k === "cookie") {
      const rest = withoutPlatformCookies(v);
      if (rest) headers[k] = rest;
      return;
    }
    headers[k] = v;
  });
  headers["x-forwarded-host"] = incoming.host;
  headers["x-forwarded-proto"] = incoming.protocol.replace(":", "");
  if (clientPrefix) headers["x-forwarded-prefix"] = clientPrefix;
  if (body) headers["content-length"] = String(body.length);
  return headers;
}

/**
 * Sends the request to the deployment's live revision, again to a fresh route when the first could
 * not have seen it; the upstream response, or the answer when there is none (refused, not serving,
 * no answer).
 */
async function sendToRevision(d: ProxyDeps, c: Context<AppEnv>, out: Outgoing): Promise<Upstream | Response> {
  const { id, rest, method, headers, body, signal } = out;
  let lastError: Error | null = null;
  for (let attempt = 0; attempt < 3; attempt++) {
    const route: Route = await d.engine().route(id, attempt > 0);
    if (route.kind === "none") {
      // Whether it serves is the deployment's workspace's business: others are told it does not exist.
      const refused = attempt === 0 && route.access ? await admit(d.authenticate, c, id, route.access, rest) : null;
      return refused instanceof Response ? refused : problem(route.status, route.detail);
    }
    if (attempt === 0) {
      const admitted = await admit(d.authenticate, c, id, route, rest);
      if (admitted instanceof Response) return admitted;
      if (admitted) headers[PRINCIPAL_HEADER] = encodePrincipal(admitted);
      // The caller's platform credentials stay here: deployed code learns who calls from the principal header.
      for (const name of await platformCredentialHeaders(c.req.raw.headers, d.authenticate, admitted))
        delete headers[name];
    }
    const live: LiveRevision | null = route.kind === "live" ? route.live : null;
    const base = route.kind === "live" ? route.live.url : route.url;
    live?.begin();
    let finished = false;
    const done = () => {
      if (!finished) {
        finished = true;
        live?.end();
      }
    };
    try {
      const res = await sendUpstream(base, rest + out.search, { method, headers, body, signal });
      return { res, done };
    } catch (err) {
      done();
      lastError = err as Error;
      // Resent only when the agent server cannot have seen it: a run must not start twice.
      if (upstreamFailure(err as NodeJS.ErrnoException) === "other" || signal.aborted) break;
      await new Promise((r) => setTimeout(r, 20 * (attempt + 1)));
    }
  }
  return noAnswer(d, c, out, lastError);
}

function noAnswer(d: ProxyDeps, c: Context<AppEnv>, out: Outgoing, lastError: Error | null): Response {
  if (out.signal.aborted) return problem(499, "client closed the request");
  const e = lastError as (NodeJS.ErrnoException & { reusedSocket?: boolean }) | null;
  d.log.warn(
    {
      deploymentId: out.id,
      method: out.method,
      path: out.rest,
      code: e?.code,
      reusedSocket: e?.reusedSocket,
      err: e,
      requestId: c.get("requestId"),
    },
    "the deployment's agent server did not answer",
  );
  return problem(502, `The deployment's agent server did not answer: ${lastError?.message ?? "unknown error"}`);
}

/** The agent server's response streamed to the client, counted in flight until it ends. */
function answer(
  c: Context<AppEnv>,
  upstream: Upstream,
  method: string,
  clientPrefix: string,
  ownHost: boolean,
): Response {
  const { res, done } = upstream;
  res.once("close", done);
  res.once("end", done);
  res.once("error", done);
  const status = res.statusCode ?? 502;
  const bodyless = method === "HEAD" || status === 204 || status === 304;
  const out = responseHeaders(res.headers, clientPrefix, !ownHost);
  const outgoing = nodeResponseOf(c);
  // Not for HEAD: Hono answers HEAD by running the GET route and copying its Response.
  if (outgoing && alreadySentUsable && proxyTuning.pipeResponses && method !== "HEAD")
    return pipeToClient(res, outgoing, status, { ...out, "x-request-id": c.get("requestId") }, bodyless);
  const webHeaders = new Headers();
  for (const [k, v] of Object.entries(out))
    for (const one of Array.isArray(v) ? v : [String(v)]) webHeaders.append(k, one);
  if (bodyless) {
    res.resume();
    return new Response(null, { status, headers: webHeaders });
  }
  return new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>, { status, headers: webHeaders });
}
