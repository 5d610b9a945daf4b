import { Hono, type Context } from "hono";
import { bodyLimit } from "hono/body-limit";
import { HTTPException } from "hono/http-exception";
import { requestId } from "hono/request-id";
import type { Logger } from "../log/logger.ts";
import type { Feature, PlatformContext } from "../platform/context.ts";
import { principalOf } from "./authenticate.ts";
import { mountDocs } from "./docs-page.ts";
import { HttpError } from "./errors.ts";
import { OpenApiRegistry } from "./openapi.ts";
import type { AppEnv } from "./principal.ts";
import { Router } from "./route.ts";
import { observeHttp } from "../metrics/index.ts";

export const API_VERSION = "0.1.0";

function errorResponse(c: Context<AppEnv>, err: unknown, log: Logger): Response {
  if (err instanceof HttpError) {
    for (const [k, v] of Object.entries(err.headers)) c.header(k, v);
    return c.json({ detail: err.detail }, err.status as 400);
  }
  if (err instanceof HTTPException) {
    // Hono's own exceptions (body limit, malformed requests) keep their status with our body shape.
    return c.json({ detail: err.message || "Bad request" }, err.status);
  }
  log.error({ err, requestId: c.get("requestId"), path: c.req.path }, "unhandled error");
  return c.json({ detail: "Internal server error", request_id: c.get("requestId") }, 500);
}

/**
 * The control plane's HTTP app: request ids, access logs, a body size limit, `/ok`, the OpenAPI
 * document and docs, then every feature's routes under `/v2` and again under `/api/v2`.
 */
export function createHttpApp(ctx: PlatformContext, features: Feature[]): Hono<AppEnv> {
  const app = new Hono<AppEnv>();
  const registry = new OpenApiRegistry();
  const log = ctx.log;

  app.use("*", requestId({ headerName: "X-Request-Id" }));
  app.use("*", async (c, next) => {
    const started = performance.now();
    await next();
    const ms = Math.round((performance.now() - started) * 10) / 10;
    const line = { requestId: c.get("requestId"), method: c.req.method, path: c.req.path, status: c.res.status, ms };
    observeHttp(ctx, c, ms);
    if (c.res.status >= 500) log.error(line, "request");
    else log.debug(line, "request");
  });
  const limitBody = bodyLimit({
    maxSize: ctx.config.bodyLimitBytes,
    onError: (c) => c.json({ detail: `Request body too large: the limit is ${ctx.config.bodyLimitBytes} bytes` }, 413),
  });
  const streamed = features.flatMap((f) => f.streamedBodies ?? []);
  app.use("*", (c, next) => (streamed.some((re) => re.test(c.req.path)) ? next() : limitBody(c, next)));
  app.onError((err, c) => errorResponse(c, err, log));
  app.notFound((c) => c.json({ detail: `Not found: ${c.req.method} ${c.req.path}` }, 404));

  app.get("/ok", (c) => c.json({ ok: true }));
  app.get("/openapi.json", (c) =>
    c.json(
      registry.document({
        title: "Wharf control plane",
        version: API_VERSION,
        description: "Deployments, agent connections, sandboxes and workspace secrets.",
      }),
    ),
  );
  mountDocs(app, "/openapi.json");

  const v1 = new Hono<AppEnv>();
  v1.onError((err, c) => errorResponse(c, err, log));
  v1.notFound((c) => c.json({ detail: "API version v1 is reserved; use /v2" }, 404));
  const v1Router = new Router(v1, registry, "/v1", principalOf(ctx.authenticate));
  for (const feature of features) feature.v1Routes?.(v1Router, ctx);
  app.route("/v1", v1);

  const v2 = new Hono<AppEnv>();
  v2.onError((err, c) => errorResponse(c, err, log));
  v2.notFound((c) => c.json({ detail: `Not found: ${c.req.method} ${c.req.path}` }, 404));
  const router = new Router(v2, registry, "/v2", principalOf(ctx.authenticate));
  for (const feature of features) feature.routes?.(router, ctx);
  app.route("/v2", v2);
  app.route("/api/v2", v2);

  for (const feature of features) feature.rootRoutes?.(app, ctx);
  return app;
}
