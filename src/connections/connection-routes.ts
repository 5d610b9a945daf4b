import { z } from "zod";
import { notFound } from "../http/errors.ts";
import type { Router } from "../http/route.ts";
import type { FlowDeps } from "./auth-flow.ts";
import { createConnection, deleteConnection, listConnections } from "./connection-store.ts";
import { agentIdSchema } from "./flow-routes.ts";

/** The interface's agent connection record (every field present; nulls where nullable). */
export const agentConnection = z.object({
  id: z.string(),
  agent_id: z.string(),
  oauth_token_id: z.string(),
  provider_id: z.string(),
  provider_account_label: z.string().nullable(),
  scopes: z.array(z.string()),
  expires_at: z.string().nullable(),
  created_by: z.string(),
  created_at: z.string(),
});

const uuid = z.uuid({ message: "Input should be a valid UUID" }).transform((s) => s.toLowerCase());

export function registerConnectionRoutes(router: Router, deps: FlowDeps): void {
  const tags = ["agent connections"];
  router.add({
    method: "get",
    path: "/auth/agents/:agent_id/connections",
    summary: "List an agent's connections (agents are assistants, identified by UUID)",
    tags,
    params: z.object({ agent_id: agentIdSchema }),
    responses: {
      200: { description: "The agent's connections", schema: z.object({ data: z.array(agentConnection) }) },
    },
    handler: async ({ c, principal, params }) =>
      c.json({ data: await listConnections(deps.db, principal.workspaceId, params.agent_id) }),
  });
  router.add({
    method: "post",
    path: "/auth/agents/:agent_id/connections",
    summary: "Attach an existing OAuth token (account) to an agent",
    tags,
    params: z.object({ agent_id: agentIdSchema }),
    body: z.object({ oauth_token_id: uuid }).strict(),
    responses: {
      201: { description: "The connection", schema: agentConnection },
      404: { description: "No such token" },
      409: { description: "Already connected" },
    },
    handler: async ({ c, principal, params, body }) =>
      c.json(
        await createConnection(deps.db, {
          workspaceId: principal.workspaceId,
          agentId: params.agent_id,
          tokenId: body.oauth_token_id,
          createdBy: principal.userId,
        }),
        201,
      ),
  });
  router.add({
    method: "delete",
    path: "/auth/agents/:agent_id/connections/:connection_id",
    summary: "Detach a connection from an agent (the token itself stays)",
    tags,
    params: z.object({ agent_id: agentIdSchema, connection_id: uuid }),
    responses: { 204: { description: "Detached" }, 404: { description: "No such connection" } },
    handler: async ({ c, principal, params }) => {
      if (!(await deleteConnection(deps.db, principal.workspaceId, params.agent_id, params.connection_id)))
        throw notFound("Connection");
      return c.body(null, 204);
    },
  });
}
