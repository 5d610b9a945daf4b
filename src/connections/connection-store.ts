import type { Kysely } from "kysely";
import { conflict, notFound } from "../http/errors.ts";
import { nowIso } from "../store/database.ts";
import { newId } from "../store/ids.ts";
import type { Database } from "../store/schema.ts";
import { parseScopes } from "./token-vault.ts";

/** The interface's agent connection record: every field present, nulls where nullable. */
export interface AgentConnection {
  id: string;
  agent_id: string;
  oauth_token_id: string;
  provider_id: string;
  provider_account_label: string | null;
  scopes: string[];
  expires_at: string | null;
  created_by: string;
  created_at: string;
}

function connectionQuery(db: Kysely<Database>, workspaceId: string, agentId: string) {
  return db
    .selectFrom("agent_connections as c")
    .innerJoin("oauth_tokens as t", "t.id", "c.oauth_token_id")
    .select([
      "c.id",
      "c.agent_id",
      "c.oauth_token_id",
      "t.provider_id",
      "t.provider_account_label",
      "t.scopes",
      "t.expires_at",
      "c.created_by",
      "c.created_at",
    ])
    .where("c.workspace_id", "=", workspaceId)
    .where("c.agent_id", "=", agentId);
}

type ConnectionRow = Omit<AgentConnection, "scopes"> & { scopes: string };
const toConnection = (r: ConnectionRow): AgentConnection => ({
  id: r.id,
  agent_id: r.agent_id,
  oauth_token_id: r.oauth_token_id,
  provider_id: r.provider_id,
  provider_account_label: r.provider_account_label ?? null,
  scopes: parseScopes(r.scopes),
  expires_at: r.expires_at ?? null,
  created_by: r.created_by,
  created_at: r.created_at,
});

export async function listConnections(
  db: Kysely<Database>,
  workspaceId: string,
  agentId: string,
): Promise<AgentConnection[]> {
  const rows = await connectionQuery(db, workspaceId, agentId).orderBy("c.created_at").orderBy("c.id").execute();
  return rows.map(toConnection);
}

/** Attaches a token to an agent. `ifMissing` makes a repeat a no-op (the flow's own attach). */
export async function createConnection(
  db: Kysely<Database>,
  input: { workspaceId: string; agentId: string; tokenId: string; createdBy: string },
  options: { ifMissing?: boolean } = {},
): Promise<AgentConnection> {
  const token = await db
    .selectFrom("oauth_tokens")
    .select("id")
    .where("workspace_id", "=", input.workspaceId)
    .where("id", "=", input.tokenId)
    .executeTakeFirst();
  if (!token) throw notFound("OAuth token");
  const inserted = await db
    .insertInto("agent_connections")
    .values({
      id: newId(),
      workspace_id: input.workspaceId,
      agent_id: input.agentId,
      oauth_token_id: input.tokenId,
      created_by: input.createdBy,
      created_at: nowIso(),
    })
    .onConflict((oc) => oc.columns(["workspace_id", "agent_id", "oauth_token_id"]).doNothing())
    .returning("id")
    .executeTakeFirst();
  if (!inserted && !options.ifMissing) throw conflict("This token is already connected to the agent");
  const row = await connectionQuery(db, input.workspaceId, input.agentId)
    .where("c.oauth_token_id", "=", input.tokenId)
    .executeTakeFirst();
  if (!row) throw notFound("OAuth token");
  return toConnection(row);
}

export async function deleteConnection(
  db: Kysely<Database>,
  workspaceId: string,
  agentId: string,
  connectionId: string,
): Promise<boolean> {
  const res = await db
    .deleteFrom("agent_connections")
    .where("workspace_id", "=", workspaceId)
    .where("agent_id", "=", agentId)
    .where("id", "=", connectionId)
    .executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}

/** Is the token attached to the agent? */
export async function isConnected(
  db: Kysely<Database>,
  workspaceId: string,
  agentId: string,
  tokenId: string,
): Promise<boolean> {
  const r = await db
    .selectFrom("agent_connections")
    .select("id")
    .where("workspace_id", "=", workspaceId)
    .where("agent_id", "=", agentId)
    .where("oauth_token_id", "=", tokenId)
    .executeTakeFirst();
  return r !== undefined;
}
