import { z } from "zod";
import { HttpError } from "../http/errors.ts";
import type { Router } from "../http/route.ts";
import { completeCallback } from "./auth-callback.ts";
import { authenticate, waitForAuth, type FlowDeps } from "./auth-flow.ts";
import { callbackPage, wantsHtml } from "./callback-page.ts";
import { providerId } from "./provider-schemas.ts";

export const agentIdSchema = z.uuid({ message: "Input should be a valid UUID" }).transform((s) => s.toLowerCase());
const scope = z
  .string()
  .min(1)
  .max(256)
  .regex(/^[\x21-\x7e]+$/, "Scopes are printable ASCII without spaces");

export const authenticateBody = z
  .object({
    provider: providerId,
    scopes: z.array(scope).max(50),
    user_id: z.string().min(1).max(256).nullish(),
    ls_user_id: z.string().min(1).max(256).nullish(),
    agent_id: agentIdSchema.nullish(),
    force_new: z.boolean().default(false),
    token_id: z.uuid({ message: "Input should be a valid UUID" }).nullish(),
    is_default: z.boolean().default(true),
    // Accepted for compatibility with LangSmith Deployment's clients; Wharf has no shared public clients.
    use_agent_builder_public_oauth: z.boolean().optional(),
  })
  .strict();

const authenticateResponse = z.object({
  status: z.enum(["completed", "pending", "connection_required", "token_expired"]),
  url: z.string().nullable(),
  auth_id: z.string().nullable(),
  token: z.string().nullable(),
  user_id: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()).nullable(),
});

const waitResponse = z.object({
  status: z.enum(["completed", "pending", "timeout", "not_found", "failed"]),
  auth_id: z.string(),
  token: z.string().nullable(),
  error: z.string().nullable(),
  metadata: z.record(z.string(), z.unknown()).nullable(),
});

const callbackQuery = z.object({
  state: z.string().min(1).max(2048),
  code: z.string().min(1).max(8192).optional(),
  error: z.string().max(256).optional(),
  error_description: z.string().max(2048).optional(),
});

const securityHeaders = {
  "Cache-Control": "no-store",
  // The page's URL holds the code and the state: never send it on as a referrer.
  "Referrer-Policy": "no-referrer",
  "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
  "X-Content-Type-Options": "nosniff",
};

const tags = ["auth flow"];

export function registerFlowRoutes(router: Router, deps: FlowDeps): void {
  registerFlowStart(router, deps);
  registerBrowserCallback(router, deps);
  registerBridgeCallback(router, deps);
}

function registerFlowStart(router: Router, deps: FlowDeps): void {
  router.add({
    method: "post",
    path: "/auth/authenticate",
    summary: "Get a fresh OAuth token for the user (and agent), or start the connect flow when there is none",
    tags,
    body: authenticateBody,
    responses: {
      200: { description: "completed with a token, or a flow to follow", schema: authenticateResponse },
      404: { description: "No such provider or token" },
    },
    handler: async ({ c, principal, body }) => c.json(await authenticate(deps, principal, body)),
  });
  router.add({
    method: "get",
    path: "/auth/wait/:auth_id",
    summary: "Long-poll a started flow until it completes (the token), fails, or `timeout` seconds pass",
    tags,
    params: z.object({ auth_id: z.uuid({ message: "Input should be a valid UUID" }) }),
    query: z.object({ timeout: z.coerce.number().min(0).max(120).default(30) }),
    responses: { 200: { description: "completed, pending, timeout, not_found or failed", schema: waitResponse } },
    handler: async ({ c, principal, params, query }) =>
      c.json(await waitForAuth(deps, principal, params.auth_id.toLowerCase(), query.timeout, c.req.raw.signal)),
  });
}

function registerBrowserCallback(router: Router, deps: FlowDeps): void {
  router.add({
    method: "get",
    path: "/auth/callback/:provider_id",
    summary: "The redirect URI registered at the provider: exchanges the code, stores the token, shows a done page",
    tags,
    auth: "none",
    params: z.object({ provider_id: providerId }),
    query: callbackQuery,
    responses: {
      200: { description: "Connected (an HTML page for browsers, JSON otherwise)" },
      400: { description: "Unknown, expired or used state, or the provider refused" },
    },
    handler: async ({ c, params }) => {
      const html = wantsHtml(c.req.header("accept"));
      try {
        const done = await completeCallback(deps, params.provider_id, new URL(c.req.url).searchParams);
        const who = done.providerAccountLabel ? ` as ${done.providerAccountLabel}` : "";
        if (html)
          return c.html(
            callbackPage(
              true,
              "Connected",
              `Your ${done.providerId} account is connected${who}. You can close this window.`,
            ),
            200,
            securityHeaders,
          );
        return c.json(
          {
            status: "completed",
            auth_id: done.authId,
            oauth_token_id: done.tokenId,
            provider_id: done.providerId,
            provider_account_label: done.providerAccountLabel,
            agent_id: done.agentId,
          },
          200,
          securityHeaders,
        );
      } catch (err) {
        if (!html || !(err instanceof HttpError)) throw err;
        return c.html(callbackPage(false, "Connection failed", String(err.detail)), err.status as 400, securityHeaders);
      }
    },
  });
}

function registerBridgeCallback(router: Router, deps: FlowDeps): void {
  router.add({
    method: "post",
    path: "/auth/callback/:provider_id",
    summary: "Front-end bridge: finish a flow with the `code` and `state` the provider sent to your own page",
    tags,
    auth: "none",
    params: z.object({ provider_id: providerId }),
    body: z.object({ code: z.string().min(1).max(8192), state: z.string().min(1).max(2048) }).strict(),
    responses: {
      200: { description: "Connected" },
      400: { description: "Unknown, expired or used state, or the provider refused" },
    },
    handler: async ({ c, params, body }) => {
      const done = await completeCallback(
        deps,
        params.provider_id,
        new URLSearchParams({ code: body.code, state: body.state }),
      );
      return c.json(
        {
          status: "completed",
          auth_id: done.authId,
          oauth_token_id: done.tokenId,
          provider_id: done.providerId,
          provider_account_label: done.providerAccountLabel,
          agent_id: done.agentId,
        },
        200,
        securityHeaders,
      );
    },
  });
}
