import { Hono } from "hono";
import { HttpError, ValidationFailed } from "../../http/errors.ts";
import { registerAssistantRoutes } from "./assistant-routes.ts";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { registerCronRoutes } from "../crons/cron-routes.ts";
import { AgentError } from "../errors.ts";
import { PUBLIC_PATHS, resolveAuth } from "../auth/request-auth.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import { registerRunRoutes } from "./run-routes.ts";
import { registerStoreRoutes } from "./store-routes.ts";
import { registerThreadRoutes } from "./thread-routes.ts";
import { registerThreadStreamRoute } from "./thread-stream.ts";
import { CORS_HEADERS } from "../wire.ts";

const AGENT_SERVER_VERSION = "0.1.0";

function textError(status: number, message: string, headers: Record<string, string> = {}): Response {
  return new Response(message, { status, headers: { ...CORS_HEADERS, "content-type": "text/plain;charset=UTF-8", ...headers } });
}

/**
 * The LangGraph server API of one project as a Hono app: CORS, authentication (custom handler,
 * platform API key, or open in `wharf dev`), then meta, assistants, threads and runs. Errors are
 * the message as text (as the LangGraph server answers); validation errors a 422 with `detail`.
 */
export function buildAgentApp(ctx: AgentServerContext, engine: RunEngine): Hono<AgentEnv> {
  const app = new Hono<AgentEnv>();
  app.onError((err, c) => {
    if (err instanceof ValidationFailed) return new Response(JSON.stringify({ detail: err.issues }), { status: 422, headers: { ...CORS_HEADERS, "content-type": "application/json" } });
    if (err instanceof AgentError) return textError(err.status, err.message, err.headers);
    if (err instanceof HttpError) return textError(err.status, typeof err.detail === "string" ? err.detail : err.message, err.headers);
    ctx.log.error({ err, path: c.req.path, method: c.req.method }, "agent server: unhandled error");
    return textError(500, "Internal server error");
  });
  app.notFound((c) => textError(404, `Not found: ${c.req.method} ${c.req.path}`));

  app.use("*", async (c, next) => {
    if (c.req.method === "OPTIONS") {
      return new Response(null, {
        status: 204,
        headers: {
          ...CORS_HEADERS,
          "access-control-allow-methods": "GET,POST,PUT,PATCH,DELETE,OPTIONS",
          "access-control-allow-headers": c.req.header("access-control-request-headers") ?? "*",
          "access-control-max-age": "600",
        },
      });
    }
    c.set("auth", PUBLIC_PATHS.has(c.req.path) ? null : await resolveAuth(ctx, c.req.raw));
    await next();
  });

  app.get("/ok", () => new Response('{"ok":true}', { headers: { ...CORS_HEADERS, "content-type": "application/json" } }));
  app.get("/info", () =>
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

  registerAssistantRoutes(app, ctx);
  registerRunRoutes(app, ctx, engine);
  registerCronRoutes(app, ctx);
  registerThreadRoutes(app, ctx, engine);
  registerStoreRoutes(app, ctx);
  registerThreadStreamRoute(app, ctx, engine);
  return app;
}
