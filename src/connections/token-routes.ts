import { z } from "zod";
import type { Router } from "../http/route.ts";
import type { FlowDeps } from "./auth-flow.ts";
import { providerId } from "./provider-schemas.ts";
import { revokeAndDelete } from "./token-revocation.ts";
import { getOwnedToken, listTokens, setTokenMetadata, toTokenSummary } from "./token-vault.ts";

const tokenSummary = z.object({
  id: z.string(),
  provider_id: z.string(),
  provider_account_label: z.string().nullable(),
  scopes: z.array(z.string()),
  expires_at: z.string().nullable(),
  is_default: z.boolean(),
  status: z.enum(["active", "token_expired"]),
  user_id: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});

/** Tokens belong to an owner: `user_id` (the id `authenticate` was called with), else the caller. */
const ownerQuery = { user_id: z.string().min(1).max(256).optional() };
const flag = z.enum(["true", "false", "1", "0"]).transform((v) => v === "true" || v === "1");
const tokenParams = z.object({ token_id: z.uuid({ message: "Input should be a valid UUID" }) });

const tags = ["auth tokens"];

function owner(principal: { workspaceId: string; userId: string }, userId?: string) {
  return { workspaceId: principal.workspaceId, userId: userId ?? principal.userId };
}

export function registerTokenRoutes(router: Router, deps: FlowDeps): void {
  registerTokenReads(router, deps);
  registerTokenLabels(router, deps);
  registerTokenRevocation(router, deps);
}

function registerTokenReads(router: Router, deps: FlowDeps): void {
  router.add({
    method: "get",
    path: "/auth/tokens",
    summary: "The owner's OAuth tokens (accounts), without any token material",
    tags,
    query: z.object({ provider_id: providerId.optional(), ...ownerQuery }),
    responses: { 200: { description: "Tokens", schema: z.array(tokenSummary) } },
    handler: async ({ c, principal, query }) =>
      c.json((await listTokens(deps.db, owner(principal, query.user_id), query.provider_id)).map(toTokenSummary)),
  });
  router.add({
    method: "get",
    path: "/auth/tokens/exists",
    summary: "Does the owner have a token for the provider?",
    tags,
    query: z.object({ provider_id: providerId, ...ownerQuery }),
    responses: { 200: { description: "Whether a token exists", schema: z.object({ has_token: z.boolean() }) } },
    handler: async ({ c, principal, query }) =>
      c.json({ has_token: (await listTokens(deps.db, owner(principal, query.user_id), query.provider_id)).length > 0 }),
  });
}

function registerTokenLabels(router: Router, deps: FlowDeps): void {
  router.add({
    method: "patch",
    path: "/auth/tokens/:token_id/metadata",
    summary: "Label an account or make it the owner's default for its provider",
    tags,
    params: tokenParams,
    query: z.object(ownerQuery),
    body: z
      .object({
        provider_account_label: z.string().trim().min(1).max(200).nullish(),
        is_default: z.boolean().nullish(),
      })
      .strict(),
    responses: {
      200: { description: "The token", schema: tokenSummary },
      404: { description: "No such token of this owner" },
    },
    handler: async ({ c, principal, params, query, body }) =>
      c.json(
        toTokenSummary(
          await setTokenMetadata(deps.db, owner(principal, query.user_id), params.token_id.toLowerCase(), body),
        ),
      ),
  });
}

function registerTokenRevocation(router: Router, deps: FlowDeps): void {
  router.add({
    method: "delete",
    path: "/auth/tokens/:token_id",
    summary: "Revoke a token at the provider (RFC 7009), then delete it and its connections",
    tags,
    params: tokenParams,
    query: z.object({ force: flag.optional(), ...ownerQuery }),
    responses: {
      204: { description: "Revoked and deleted" },
      404: { description: "No such token of this owner" },
      502: { description: "The provider could not revoke it; the token is kept" },
    },
    handler: async ({ c, principal, params, query }) => {
      const row = await getOwnedToken(deps.db, owner(principal, query.user_id), params.token_id.toLowerCase());
      await revokeAndDelete(deps, row, query.force ?? false);
      return c.body(null, 204);
    },
  });
  router.add({
    method: "delete",
    path: "/auth/tokens",
    summary: "Revoke and delete all of the owner's tokens for a provider, across agents",
    tags,
    query: z.object({ provider_id: providerId, force: flag.optional(), ...ownerQuery }),
    responses: {
      200: {
        description: "What was deleted",
        schema: z.object({ deleted: z.number(), revoked: z.number(), kept: z.array(z.string()) }),
      },
    },
    handler: async ({ c, principal, query }) => {
      const rows = await listTokens(deps.db, owner(principal, query.user_id), query.provider_id);
      let deleted = 0;
      let revoked = 0;
      const kept: string[] = [];
      for (const row of rows) {
        try {
          const r = await revokeAndDelete(deps, row, query.force ?? false);
          deleted++;
          if (r.revoked) revoked++;
        } catch {
          kept.push(row.id);
        }
      }
      return c.json({ deleted, revoked, kept });
    },
  });
}
