import { z } from "zod";
import { notFound } from "../http/errors.ts";
import type { Feature, PlatformContext } from "../platform/context.ts";
import type { Router } from "../http/route.ts";
import { createApiKey, listApiKeys, revokeApiKey } from "./api-keys.ts";
import { issueBearerToken } from "./bearer-tokens.ts";
import { createWorkspace, listWorkspacesOfUser } from "./workspaces.ts";

const uuid = z.string().uuid();
const apiKeySummary = z.object({
  id: z.string(),
  name: z.string(),
  prefix: z.string(),
  workspace_id: z.string(),
  created_by: z.string(),
  created_at: z.string(),
  last_used_at: z.string().nullable(),
  expires_at: z.string().nullable(),
  revoked_at: z.string().nullable(),
});
const workspace = z.object({ id: z.string(), name: z.string(), created_at: z.string(), updated_at: z.string() });

export const identityFeature: Feature = {
  name: "identity",
  routes(router, ctx) {
    registerCallerRoutes(router);
    registerWorkspaceRoutes(router, ctx);
    registerApiKeyRoutes(router, ctx);
    registerTokenRoutes(router, ctx);
  },
};

function registerCallerRoutes(router: Router): void {
  router.add({
    method: "get",
    path: "/me",
    summary: "Who the credential belongs to and which workspace the request acts on",
    tags: ["identity"],
    responses: {
      200: {
        description: "The caller",
        schema: z.object({ user_id: z.string(), workspace_id: z.string(), scheme: z.string() }),
      },
    },
    handler: ({ c, principal }) =>
      c.json({ user_id: principal.userId, workspace_id: principal.workspaceId, scheme: principal.scheme }),
  });
}

function registerWorkspaceRoutes(router: Router, ctx: PlatformContext): void {
  router.add({
    method: "get",
    path: "/workspaces",
    summary: "Workspaces the caller's user belongs to",
    tags: ["identity"],
    responses: { 200: { description: "Workspaces", schema: z.array(workspace) } },
    handler: async ({ c, principal }) => c.json(await listWorkspacesOfUser(ctx.db, principal.userId)),
  });
  router.add({
    method: "post",
    path: "/workspaces",
    summary: "Create a workspace with the caller as owner (select it with X-Tenant-Id)",
    tags: ["identity"],
    body: z.object({ name: z.string().trim().min(1).max(100) }).strict(),
    responses: { 201: { description: "Created", schema: workspace } },
    handler: async ({ c, principal, body }) => c.json(await createWorkspace(ctx.db, body.name, principal.userId), 201),
  });
}

function registerApiKeyRoutes(router: Router, ctx: PlatformContext): void {
  router.add({
    method: "get",
    path: "/api-keys",
    summary: "API keys of the workspace (never the keys themselves)",
    tags: ["identity"],
    responses: { 200: { description: "Keys", schema: z.array(apiKeySummary) } },
    handler: async ({ c, principal }) => c.json(await listApiKeys(ctx.db, principal.workspaceId)),
  });
  router.add({
    method: "post",
    path: "/api-keys",
    summary: "Create an API key for the workspace; the key is shown in this response only",
    tags: ["identity"],
    body: z
      .object({
        name: z.string().trim().min(1).max(100),
        expires_in_seconds: z
          .number()
          .int()
          .min(60)
          .max(10 * 365 * 24 * 3600)
          .nullish(),
      })
      .strict(),
    responses: { 201: { description: "Created", schema: apiKeySummary.extend({ key: z.string() }) } },
    handler: async ({ c, principal, body }) => {
      const expiresAt = body.expires_in_seconds
        ? new Date(Date.now() + body.expires_in_seconds * 1000).toISOString()
        : null;
      const { key, summary } = await createApiKey(ctx.db, {
        workspaceId: principal.workspaceId,
        userId: principal.userId,
        name: body.name,
        expiresAt,
      });
      return c.json({ ...summary, key }, 201);
    },
  });
  router.add({
    method: "delete",
    path: "/api-keys/:key_id",
    summary: "Revoke an API key",
    tags: ["identity"],
    params: z.object({ key_id: uuid }),
    responses: {
      200: { description: "Revoked", schema: apiKeySummary },
      404: { description: "No such key in this workspace" },
    },
    handler: async ({ c, principal, params }) => {
      const revoked = await revokeApiKey(ctx.db, principal.workspaceId, params.key_id);
      if (!revoked) throw notFound("API key");
      return c.json(revoked);
    },
  });
}

function registerTokenRoutes(router: Router, ctx: PlatformContext): void {
  router.add({
    method: "post",
    path: "/tokens",
    summary: "Issue a bearer token (signed JWT) for the calling user and workspace",
    tags: ["identity"],
    body: z
      .object({
        expires_in_seconds: z
          .number()
          .int()
          .min(60)
          .max(30 * 24 * 3600)
          .nullish(),
      })
      .strict(),
    bodyOptional: true,
    responses: {
      201: {
        description: "Token",
        schema: z.object({ access_token: z.string(), token_type: z.literal("bearer"), expires_at: z.string() }),
      },
    },
    handler: async ({ c, principal, body }) => {
      const ttl = body.expires_in_seconds ?? ctx.config.bearerTtlSeconds;
      const { token, expiresAt } = await issueBearerToken(
        ctx.box,
        { userId: principal.userId, workspaceId: principal.workspaceId },
        ttl,
      );
      return c.json({ access_token: token, token_type: "bearer" as const, expires_at: expiresAt }, 201);
    },
  });
}
