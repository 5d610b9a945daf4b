import type { Kysely } from "kysely";
import type { SecretBox } from "../../crypto/secret-box.ts";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import type { Database } from "../../store/schema.ts";
import "../egress-tables.ts";

/** Associated data binding a sealed proxy_config value to its row and workspace. */
const aad = (workspaceId: string, id: string) => `egress-value:${workspaceId}:${id}`;

// Listed for key rotation as `egress.opaque-value` in src/secrets/sealed-columns.ts.

interface Deps {
  db: Kysely<Database>;
  box: SecretBox;
}

/** Seals a write-only value and returns the id the stored proxy_config refers to. */
export async function sealValue(deps: Deps, workspaceId: string, value: string): Promise<string> {
  const id = newId();
  const sealed = deps.box.seal(value, aad(workspaceId, id));
  await deps.db
    .insertInto("egress_sealed_values")
    .values({ id, workspace_id: workspaceId, key_id: sealed.keyId, ciphertext: sealed.blob, created_at: nowIso() })
    .execute();
  return id;
}

/** Opens the named values of one workspace; ids of another workspace are simply absent. */
export async function openValues(deps: Deps, workspaceId: string, ids: string[]): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  if (ids.length === 0) return out;
  const rows = await deps.db
    .selectFrom("egress_sealed_values")
    .select(["id", "key_id", "ciphertext"])
    .where("workspace_id", "=", workspaceId)
    .where("id", "in", ids)
    .execute();
  for (const r of rows) out.set(r.id, deps.box.open({ keyId: r.key_id, blob: r.ciphertext }, aad(workspaceId, r.id)));
  return out;
}

/** Deletes values no longer referenced (after a PATCH replaced the config that held them). */
export async function deleteValues(db: Kysely<Database>, workspaceId: string, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await db.deleteFrom("egress_sealed_values").where("workspace_id", "=", workspaceId).where("id", "in", ids).execute();
}
