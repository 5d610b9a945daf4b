import fs from "node:fs";
import path from "node:path";
import type { Kysely } from "kysely";
import { createApiKey } from "../identity/api-keys.ts";
import { createUser, createWorkspace } from "../identity/workspaces.ts";
import type { Database } from "../store/schema.ts";

export interface BootstrapResult {
  /** The key, only on the very first start (it is never shown again). */
  apiKey: string | null;
  workspaceId: string;
  userId: string;
  keyFile: string;
}

export const bootstrapKeyPath = (home: string) => path.join(home, "bootstrap-key");

/**
 * On first start (no workspace yet) creates the admin user, the default workspace and one API key,
 * writing the key to `$WHARF_HOME/bootstrap-key` (0600) so the CLI on this machine can use it.
 */
export async function bootstrap(db: Kysely<Database>, home: string): Promise<BootstrapResult> {
  const keyFile = bootstrapKeyPath(home);
  const existing = await db
    .selectFrom("workspace_members")
    .select(["workspace_id", "user_id"])
    .where("role", "=", "owner")
    .orderBy("created_at")
    .limit(1)
    .executeTakeFirst();
  if (existing) return { apiKey: null, workspaceId: existing.workspace_id, userId: existing.user_id, keyFile };
  const userId = await createUser(db, "admin@localhost", "admin");
  const ws = await createWorkspace(db, "default", userId);
  const { key } = await createApiKey(db, { workspaceId: ws.id, userId, name: "bootstrap" });
  fs.mkdirSync(home, { recursive: true, mode: 0o700 });
  fs.writeFileSync(keyFile, key + "\n", { mode: 0o600 });
  fs.chmodSync(keyFile, 0o600);
  return { apiKey: key, workspaceId: ws.id, userId, keyFile };
}
