import { z } from "zod";
import type { Router } from "../http/route.ts";
import type { FlowDeps } from "./auth-flow.ts";
import { providerCreateBody, providerId, providerPatchBody, providerResponse } from "./provider-schemas.ts";
import {
  createProvider,
  deleteProviderRow,
  getProvider,
  listProviders,
  patchProvider,
  toProviderResponse,
} from "./provider-store.ts";
import { revokeAllOfProvider } from "./token-revocation.ts";

const providerParams = z.object({ provider_id: providerId });

export function registerProviderRoutes(router: Router, deps: FlowDeps): void {
  const tags = ["auth providers"];
  router.add({
    method: "get",
    path: "/auth/providers",
    summary: "List the workspace's OAuth providers (client secrets are never returned)",
    tags,
    responses: { 200: { description: "Providers", schema: z.array(providerResponse) } },
    handler: async ({ c, principal }) =>
      c.json(
        (await listProviders(deps.db, principal.workspaceId)).map((r) => toProviderResponse(r, deps.publicBaseUrl())),
      ),
  });
  router.add({
    method: "post",
    path: "/auth/providers",
    summary:
      "Register an OAuth provider (your client at the provider; register `redirect_uri` from the response there)",
    tags,
    body: providerCreateBody,
    responses: {
      200: { description: "The provider", schema: providerResponse },
      409: { description: "provider_id already used in this workspace" },
    },
    handler: async ({ c, principal, body }) =>
      c.json(
        toProviderResponse(await createProvider(deps.db, deps.box, principal.workspaceId, body), deps.publicBaseUrl()),
      ),
  });
  router.add({
    method: "get",
    path: "/auth/providers/:provider_id",
    summary: "Read an OAuth provider",
    tags,
    params: providerParams,
    responses: {
      200: { description: "The provider", schema: providerResponse },
      404: { description: "No such provider" },
    },
    handler: async ({ c, principal, params }) =>
      c.json(
        toProviderResponse(await getProvider(deps.db, principal.workspaceId, params.provider_id), deps.publicBaseUrl()),
      ),
  });
  router.add({
    method: "patch",
    path: "/auth/providers/:provider_id",
    summary: "Update an OAuth provider (absent or null fields stay as they are; null clears optional URLs)",
    tags,
    params: providerParams,
    body: providerPatchBody,
    responses: {
      200: { description: "The provider", schema: providerResponse },
      404: { description: "No such provider" },
    },
    handler: async ({ c, principal, params, body }) =>
      c.json(
        toProviderResponse(
          await patchProvider(deps.db, deps.box, principal.workspaceId, params.provider_id, body),
          deps.publicBaseUrl(),
        ),
      ),
  });
  router.add({
    method: "delete",
    path: "/auth/providers/:provider_id",
    summary: "Delete an OAuth provider with its tokens (revoked at the provider first, best effort) and connections",
    tags,
    params: providerParams,
    responses: { 204: { description: "Deleted" }, 404: { description: "No such provider" } },
    handler: async ({ c, principal, params }) => {
      await getProvider(deps.db, principal.workspaceId, params.provider_id);
      await revokeAllOfProvider(deps, principal.workspaceId, params.provider_id);
      await deleteProviderRow(deps.db, principal.workspaceId, params.provider_id);
      return c.body(null, 204);
    },
  });
}
