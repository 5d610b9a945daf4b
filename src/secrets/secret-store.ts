import type { Kysely } from "kysely";
import type { SecretBox } from "../crypto/secret-box.ts";
import { nowIso } from "../store/database.ts";
import type { Database } from "../store/schema.ts";

export interface SecretSummary {
  key: string;
  created_at: string;
  updated_at: string;
}

type SecretsChanged = (workspaceId: string, keys: string[]) => void;
const changeListeners = new Set<SecretsChanged>();

/**
 * Tells `fn` after secrets of a workspace were written or deleted by this process (the egress
 * proxy re-resolves the rules of running sandboxes that name them). Returns the unsubscribe.
 */
export function onSecretsChanged(fn: SecretsChanged): () => void {
  changeListeners.add(fn);
  return () => changeListeners.delete(fn);
}

function secretsChanged(workspaceId: string, keys: string[]): void {
  for (const fn of changeListeners) {
    try {
      fn(workspaceId, keys);
    } catch {
      // A listener's failure is its own; the write has happened.
    }
  }
}

/** Associated data binding a workspace secret's ciphertext to its row. */
export const secretAad = (workspaceId: string, key: string) => `workspace-secret:${workspaceId}:${key}`;

/**
 * Inserts or replaces secrets in one transaction. `ON CONFLICT DO UPDATE` makes each write a
 * single statement, so concurrent writers never lose an update to a read-modify-write race.
 */
export async function upsertSecrets(
  db: Kysely<Database>,
  box: SecretBox,
  workspaceId: string,
  items: Array<{ key: string; value: string }>,
): Promise<SecretSummary[]> {
  const now = nowIso();
  await db.transaction().execute(async (tx) => {
    for (const { key, value } of items) {
      const sealed = box.seal(value, secretAad(workspaceId, key));
      await tx
        .insertInto("secrets")
        .values({
          workspace_id: workspaceId,
          key,
          key_id: sealed.keyId,
          ciphertext: sealed.blob,
          created_at: now,
          updated_at: now,
        })
        .onConflict((oc) =>
          oc
            .columns(["workspace_id", "key"])
            .doUpdateSet({ key_id: sealed.keyId, ciphertext: sealed.blob, updated_at: now }),
        )
        .execute();
    }
  });
  secretsChanged(
    workspaceId,
    items.map((i) => i.key),
  );
  return listSecrets(
    db,
    workspaceId,
    items.map((i) => i.key),
  );
}

export async function listSecrets(
  db: Kysely<Database>,
  workspaceId: string,
  only?: string[],
): Promise<SecretSummary[]> {
  if (only && only.length === 0) return [];
  let q = db.selectFrom("secrets").select(["key", "created_at", "updated_at"]).where("workspace_id", "=", workspaceId);
  if (only) q = q.where("key", "in", only);
  return q.orderBy("key").execute();
}

export async function deleteSecret(db: Kysely<Database>, workspaceId: string, key: string): Promise<boolean> {
  const res = await db
    .deleteFrom("secrets")
    .where("workspace_id", "=", workspaceId)
    .where("key", "=", key)
    .executeTakeFirst();
  const deleted = Number(res.numDeletedRows) > 0;
  if (deleted) secretsChanged(workspaceId, [key]);
  return deleted;
}

/** Decrypted values of the named secrets that exist; for resolving `{KEY}` references. */
export async function readSecretValues(
  db: Kysely<Database>,
  box: SecretBox,
  workspaceId: string,
  keys: string[],
): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  if (keys.length === 0) return out;
  const rows = await db
    .selectFrom("secrets")
    .select(["key", "key_id", "ciphertext"])
    .where("workspace_id", "=", workspaceId)
    .where("key", "in", keys)
    .execute();
  for (const r of rows)
    out.set(r.key, box.open({ keyId: r.key_id, blob: r.ciphertext }, secretAad(workspaceId, r.key)));
  return out;
}
