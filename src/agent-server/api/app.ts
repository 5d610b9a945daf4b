import { Hono } from "hono";
import { HttpError, ValidationFailed } from "../../http/errors.ts";
import { registerDevConsole } from "./dev-console.ts";
import { registerDevRoutes } from "./dev-routes.ts";
import { shareJsonBody } from "./json-body.ts";
import { registerAssistantRoutes } from "./assistant-routes.ts";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { registerCronRoutes } from "../crons/cron-routes.ts";
import { AgentError } from "../errors.ts";
import { PUBLIC_PATHS, resolveAuth } from "../auth/request-auth.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import { registerRunRoutes } from "./run-routes.ts";
import { registerRunCancelRoutes } from "./run-cancel-routes.ts";
import { registerStoreRoutes } from "./store-routes.ts";
import { registerThreadRoutes } from "./thread-routes.ts";
import { registerThreadStreamRoute } from "./thread-stream.ts";
import { CORS_HEADERS } from "../wire.ts";
import { corsHeaders } from "./cors.ts";
import { registerUiRoutes } from "./ui-routes.ts";
import { registerProtocolRoutes } from "../protocol/index.ts";
import { AgentMetrics, observeAgentHttp } from "./metrics-routes.ts";
import { DOC_PATHS, registerOpenApiRoutes } from "./openapi-routes.ts";
import { registerMcpRoutes } from "./mcp-routes.ts";
import { registerA2aRoutes } from "./a2a-routes.ts";

const AGENT_SERVER_VERSION = "0.1.0";

function textError(status: number, message: string, headers: Record<string, string> = {}): Response {
  return new Response(message, {
    status,
    headers: { ...CORS_HEADERS, "content-type": "text/plain;charset=UTF-8", ...headers },
  });
}

/** An error as the Python LangGraph server answers it (FastAPI's `{"detail": …}`), for projects with Python graphs or auth. */
function jsonError(status: number, message: string, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify({ detail: message }), {
    status,
    headers: { ...CORS_HEADERS, "content-type": "application/json", ...headers },
  });
}

/**
 * The LangGraph server API of one project as a Hono app: CORS, authentication (custom handler,
 * platform API key, or open in `wharf dev`), then meta, assistants, threads and runs. Errors are
 * the message as text (as the LangGraph JS server answers; `{"detail"}` JSON, as the Python server, for projects with
 * Python graphs or auth); validation errors a 422 with `detail`.
 */
export function buildAgentApp(ctx: AgentServerContext, engine: RunEngine): Hono<AgentEnv> {
  const app = new Hono<AgentEnv>();
  const errorResponse = ctx.python ? jsonError : textError;
  app.onError((err, c) => {
    if (err instanceof ValidationFailed)
      return new Response(JSON.stringify({ detail: err.issues }), {
        status: 422,
        headers: { ...CORS_HEADERS, "content-type": "application/json" },
      });
    if (err instanceof AgentError) return errorResponse(err.status, err.message, err.headers);
    if (err instanceof HttpError)
      return errorResponse(err.status, typeof err.detail === "string" ? err.detail : err.message, err.headers);
    ctx.log.error({ err, path: c.req.path, method: c.req.method }, "agent server: unhandled error");
    return errorResponse(500, "Internal server error");
  });
  app.notFound((c) => errorResponse(404, `Not found: ${c.req.method} ${c.req.path}`));
  const metrics = new AgentMetrics(ctx, engine);
  observeAgentHttp(app, metrics);
  // `wharf dev`: the console's Studio for this project, ahead of the API's middleware.
  if (ctx.open) registerDevConsole(app);

  const cors = ctx.http.cors;
  app.use("*", async (c, next) => {
    const origin = c.req.header("origin") ?? null;
    if (c.req.method === "OPTIONS") {
      return new Response(null, {
        status: 204,
        headers: corsHeaders(cors, {
          origin,
          preflight: true,
          requestHeaders: c.req.header("access-control-request-headers") ?? null,
        }),
      });
    }
    // `/ok`, `/info`, the UI bundles' files (GET /ui/…) and the API's description (`/openapi.json`, `/docs`) are public, as on the LangGraph server.
    const isPublic =
      PUBLIC_PATHS.has(c.req.path) ||
      (c.req.method === "GET" && (c.req.path.startsWith("/ui/") || DOC_PATHS.has(c.req.path)));
    c.set("auth", isPublic ? null : await resolveAuth(ctx, c.req.raw));
    await next();
    // Responses carry the default CORS headers; a project's `http.cors` replaces them.
    if (cors) {
      for (const h of ["access-control-allow-origin", "access-control-expose-headers"]) c.res.headers.delete(h);
      for (const [k, v] of Object.entries(corsHeaders(cors, { origin, preflight: false, requestHeaders: null })))
        c.res.headers.set(k, v);
    }
  });

  // The project's own routes (`http.app`) come first, behind the same authentication, as on the
  // LangGraph server; what they do not match falls through to the API.
  if (ctx.userApp) {
    app.use("*", async (c, next) => {
      shareJsonBody(c.req);
      await next();
    });
    app.route("/", ctx.userApp as unknown as Hono);
  }
  const pythonApp = ctx.pythonApp;
  if (pythonApp) {
    app.use("*", async (c, next) => {
      const res = await pythonApp.handle(c.req.raw);
      if (res) return res;
      await next();
    });
  }

  const off = ctx.http.disable;
  if (!off.meta) registerMetaRoutes(app, ctx, metrics);
  if (!off.meta) registerOpenApiRoutes(app, AGENT_SERVER_VERSION);
  if (ctx.open) registerDevRoutes(app, ctx, engine);
  if (!off.assistants) registerAssistantRoutes(app, ctx, engine);
  if (!off.runs) registerRunCancelRoutes(app, ctx, engine);
  if (!off.runs) registerRunRoutes(app, ctx, engine);
  if (!off.runs) registerCronRoutes(app, ctx);
  if (!off.threads) registerThreadRoutes(app, ctx, engine);
  if (!off.store) registerStoreRoutes(app, ctx);
  if (!off.threads) registerThreadStreamRoute(app, ctx, engine);
  if (!off.threads && !off.runs) registerProtocolRoutes(app, ctx, engine);
  if (ctx.ui.size) registerUiRoutes(app, ctx);
  if (!off.runs) registerMcpRoutes(app, ctx, engine);
  if (!off.runs) registerA2aRoutes(app, ctx, engine);
  return app;
}

function registerMetaRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext, metrics: AgentMetrics): void {
  // Behind the project's authentication like the rest of the API (only `/ok` and `/info` are public).
  app.get("/metrics", () => metrics.scrape());
  app.get("/ok", () =>
    // A project's Python worker restarting after a crash: its graphs cannot run until it is back.
    ctx.python && !ctx.python.up
      ? new Response('{"ok":false,"detail":"the Python worker is restarting"}', {
          status: 503,
          headers: { ...CORS_HEADERS, "content-type": "application/json" },
        })
      : new Response('{"ok":true}', { headers: { ...CORS_HEADERS, "content-type": "application/json" } }),
  );
  app.get(
    "/info",
    () =>
      new Response(
        JSON.stringify({
          version: AGENT_SERVER_VERSION,
          langgraph_js_version: "1.7.3",
          context: "js",
          flags: { assistants: true, crons: true, langsmith: false, langsmith_tracing_replicas: false },
          ...(ctx.graphFailures.size ? { graph_errors: Object.fromEntries(ctx.graphFailures) } : {}),
        }),
        { headers: { ...CORS_HEADERS, "content-type": "application/json" } },
      ),
  );
}
