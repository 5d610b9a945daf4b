import type { Kysely } from "kysely";
import type { Database } from "../store/schema.ts";
import { nowIso } from "../store/database.ts";
import { newId } from "../store/ids.ts";

export interface Workspace {
  id: string;
  name: string;
  created_at: string;
  updated_at: string;
}

export async function createUser(db: Kysely<Database>, email: string, displayName: string): Promise<string> {
  const id = newId();
  await db.insertInto("users").values({ id, email, display_name: displayName, created_at: nowIso() }).execute();
  return id;
}

/** Creates a workspace with `ownerUserId` as its first member, in one transaction. */
export async function createWorkspace(db: Kysely<Database>, name: string, ownerUserId: string): Promise<Workspace> {
  const now = nowIso();
  const ws: Workspace = { id: newId(), name, created_at: now, updated_at: now };
  await db.transaction().execute(async (tx) => {
    await tx.insertInto("workspaces").values(ws).execute();
    await tx
      .insertInto("workspace_members")
      .values({ workspace_id: ws.id, user_id: ownerUserId, role: "owner", created_at: now })
      .execute();
  });
  return ws;
}

export async function listWorkspacesOfUser(db: Kysely<Database>, userId: string): Promise<Workspace[]> {
  return db
    .selectFrom("workspaces")
    .innerJoin("workspace_members", "workspace_members.workspace_id", "workspaces.id")
    .where("workspace_members.user_id", "=", userId)
    .select(["workspaces.id", "workspaces.name", "workspaces.created_at", "workspaces.updated_at"])
    .orderBy("workspaces.id")
    .execute();
}

export async function isMember(db: Kysely<Database>, userId: string, workspaceId: string): Promise<boolean> {
  const row = await db
    .selectFrom("workspace_members")
    .select("role")
    .where("user_id", "=", userId)
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
  return row !== undefined;
}
