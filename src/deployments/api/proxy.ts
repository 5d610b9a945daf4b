import http from "node:http";
import { Readable } from "node:stream";
import type { Context, Hono } from "hono";
import type { AppEnv } from "../../http/principal.ts";
import type { LiveRevision } from "../rollout/live-revision.ts";
import type { Authenticate } from "../../http/authenticate.ts";
import { HttpError } from "../../http/errors.ts";
import { withoutSessionCookie } from "../../console/index.ts";
import type { RolloutEngine, Route, RouteAccess } from "../rollout/rollout-engine.ts";
import { UUIDISH } from "./schemas.ts";
import { encodePrincipal, PRINCIPAL_HEADER } from "../runtime/principal-header.ts";
import { sendUpstream } from "./upstream.ts";

/** Headers that belong to one connection, never forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "proxy-authenticate", "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade", "host"]);

/** Answered by the agent server without credentials. */
const PUBLIC_PATHS = new Set(["/ok", "/info"]);

function problem(status: number, detail: string): Response {
  return new Response(JSON.stringify({ detail }), { status, headers: { "content-type": "application/json", ...(status === 503 ? { "retry-after": "1" } : {}) } });
}

interface Upstream {
  res: http.IncomingMessage;
  done: () => void;
}

/** Whether resending is safe: the upstream never saw the request (refused, or a stale keep-alive socket). */
function retryable(err: NodeJS.ErrnoException & { reusedSocket?: boolean }): boolean {
  return err.code === "ECONNREFUSED" || (err.code === "ECONNRESET" && err.reusedSocket === true);
}

/**
 * The stable URL of every deployment: `/deployments/{id}/…` is forwarded to the agent server of
 * the deployment's live revision. Responses stream through as they come (SSE is never buffered);
 * each request counts as in flight on its revision until its response ends, so a replaced revision
 * finishes what it started before it stops. Request bodies (small JSON for agent servers, capped
 * by the platform's body limit) are read first so a request refused by a server that just stopped
 * can be sent again to the new one.
 */
export function mountDeploymentProxy(app: Hono<AppEnv>, engine: () => RolloutEngine, authenticate: Authenticate): void {
  /**
   * Without custom auth the agent server accepts any platform key; the stable URL narrows that to
   * keys of the deployment's own workspace (another workspace's key reads as "not found", as on the
   * control plane). With custom auth the project's handler decides, as on LangSmith Deployment.
   */
  const admit = async (c: Context<AppEnv>, id: string, route: RouteAccess, rest: string): Promise<Response | string | null> => {
    if (PUBLIC_PATHS.has(rest)) return null;
    const headers = c.req.raw.headers;
    if (route.customAuth) {
      // The project's handler decides; a developer (Studio) request with a platform credential of
      // the deployment's workspace is passed on as that caller.
      if (headers.get("x-auth-scheme") !== "langsmith" || !(headers.get("x-api-key") || headers.get("authorization"))) return null;
      const principal = await authenticate(headers).catch(() => null);
      return principal && principal.workspaceId === route.workspaceId ? encodePrincipal(principal) : null;
    }
    try {
      const principal = await authenticate(headers);
      return principal.workspaceId === route.workspaceId ? encodePrincipal(principal) : problem(404, `Deployment ID ${id} not found.`);
    } catch (err) {
      if (err instanceof HttpError) return new Response(JSON.stringify({ detail: err.detail }), { status: err.status, headers: { "content-type": "application/json", ...err.headers } });
      throw err;
    }
  };

  const handler = async (c: Context<AppEnv>): Promise<Response> => {
    const id = c.req.param("deployment_id") ?? "";
    if (!UUIDISH.test(id)) return problem(404, `Deployment ID ${id} not found.`);
    const prefix = `/deployments/${id}`;
    const incoming = new URL(c.req.url);
    const rest = incoming.pathname.slice(prefix.length) || "/";
    const method = c.req.method;
    const body = method === "GET" || method === "HEAD" ? null : Buffer.from(await c.req.arrayBuffer());
    const headers: http.OutgoingHttpHeaders = {};
    c.req.raw.headers.forEach((v, k) => {
      if (HOP_BY_HOP.has(k) || k === PRINCIPAL_HEADER) return;
      // The console's session cookie is the platform's credential: the agent server never sees it.
      if (k === "cookie") {
        const rest = withoutSessionCookie(v);
        if (rest) headers[k] = rest;
        return;
      }
      headers[k] = v;
    });
    headers["x-forwarded-host"] = incoming.host;
    headers["x-forwarded-proto"] = incoming.protocol.replace(":", "");
    headers["x-forwarded-prefix"] = prefix;
    if (body) headers["content-length"] = String(body.length);

    let upstream: Upstream | null = null;
    let lastError: Error | null = null;
    for (let attempt = 0; attempt < 3 && !upstream; attempt++) {
      const route: Route = await engine().route(id, attempt > 0);
      if (route.kind === "none") return problem(route.status, route.detail);
      if (attempt === 0) {
        const admitted = await admit(c, id, route, rest);
        if (admitted instanceof Response) return admitted;
        if (admitted) headers[PRINCIPAL_HEADER] = admitted;
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
        const res = await sendUpstream(base, rest + incoming.search, { method, headers, body, signal: c.req.raw.signal });
        upstream = { res, done };
      } catch (err) {
        done();
        lastError = err as Error;
        if (!retryable(err as NodeJS.ErrnoException) || c.req.raw.signal.aborted) break;
        await new Promise((r) => setTimeout(r, 20 * (attempt + 1)));
      }
    }
    if (!upstream) {
      if (c.req.raw.signal.aborted) return problem(499, "client closed the request");
      return problem(502, `The deployment's agent server did not answer: ${lastError?.message ?? "unknown error"}`);
    }
    const { res, done } = upstream;
    res.once("close", done);
    res.once("end", done);
    res.once("error", done);
    const out = new Headers();
    for (const [k, v] of Object.entries(res.headers)) {
      if (v === undefined || HOP_BY_HOP.has(k)) continue;
      // Locations the agent server gives relative to its root stay under the stable URL.
      const fix = (s: string) => ((k === "location" || k === "content-location") && s.startsWith("/") ? prefix + s : s);
      if (Array.isArray(v)) for (const one of v) out.append(k, fix(one));
      else out.set(k, fix(v));
    }
    const status = res.statusCode ?? 502;
    if (method === "HEAD" || status === 204 || status === 304) {
      res.resume();
      return new Response(null, { status, headers: out });
    }
    return new Response(Readable.toWeb(res) as ReadableStream<Uint8Array>, { status, headers: out });
  };
  app.all("/deployments/:deployment_id", handler);
  app.all("/deployments/:deployment_id/*", handler);
}
