import crypto from "node:crypto";
import type { Kysely } from "kysely";
import type { Database } from "../store/schema.ts";
import { nowIso } from "../store/database.ts";
import { newId } from "../store/ids.ts";

/** What is shown about a key after creation: never the key, never its hash. */
export interface ApiKeySummary {
  id: string;
  name: string;
  prefix: string;
  workspace_id: string;
  created_by: string;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
}

export interface ApiKeyOwner {
  keyId: string;
  workspaceId: string;
  userId: string;
}

const KEY_PREFIX = "wharf_";

/**
 * Keys carry 256 random bits, so a plain SHA-256 is a sound lookup hash (no password stretching is
 * needed for values that cannot be guessed) and lets the lookup be one indexed equality.
 */
export function hashApiKey(key: string): string {
  return crypto.createHash("sha256").update(key).digest("hex");
}

export function generateApiKey(): string {
  return KEY_PREFIX + crypto.randomBytes(32).toString("base64url");
}

export async function createApiKey(
  db: Kysely<Database>,
  input: { workspaceId: string; userId: string; name: string; expiresAt?: string | null },
): Promise<{ key: string; summary: ApiKeySummary }> {
  const key = generateApiKey();
  const row = {
    id: newId(),
    workspace_id: input.workspaceId,
    user_id: input.userId,
    name: input.name,
    prefix: key.slice(0, KEY_PREFIX.length + 6),
    key_hash: hashApiKey(key),
    created_at: nowIso(),
    last_used_at: null,
    expires_at: input.expiresAt ?? null,
    revoked_at: null,
  };
  await db.insertInto("api_keys").values(row).execute();
  return { key, summary: toSummary(row) };
}

function toSummary(row: Database["api_keys"]): ApiKeySummary {
  return {
    id: row.id,
    name: row.name,
    prefix: row.prefix,
    workspace_id: row.workspace_id,
    created_by: row.user_id,
    created_at: row.created_at,
    last_used_at: row.last_used_at,
    expires_at: row.expires_at,
    revoked_at: row.revoked_at,
  };
}

/** The owner of a live key, or null for unknown, revoked or expired keys. */
export async function resolveApiKey(db: Kysely<Database>, key: string): Promise<ApiKeyOwner | null> {
  if (!key.startsWith(KEY_PREFIX) || key.length > 200) return null;
  const row = await db
    .selectFrom("api_keys")
    .select(["id", "workspace_id", "user_id", "expires_at", "revoked_at", "last_used_at"])
    .where("key_hash", "=", hashApiKey(key))
    .executeTakeFirst();
  if (!row || row.revoked_at) return null;
  if (row.expires_at && row.expires_at <= nowIso()) return null;
  await noteApiKeyUse(db, row.id, row.last_used_at);
  return { keyId: row.id, workspaceId: row.workspace_id, userId: row.user_id };
}

/** How stale "last used" may get: a busy key is written once a minute, not on every request. */
export const LAST_USED_RESOLUTION_MS = 60_000;

/** Records that a key (or a console session opened with it) was used, at most once a minute. */
export async function noteApiKeyUse(
  db: Kysely<Database>,
  keyId: string,
  lastUsedAt: string | null,
  now = Date.now(),
): Promise<void> {
  if (lastUsedAt && now - Date.parse(lastUsedAt) < LAST_USED_RESOLUTION_MS) return;
  await db
    .updateTable("api_keys")
    .set({ last_used_at: new Date(now).toISOString() })
    .where("id", "=", keyId)
    .execute();
}

export async function listApiKeys(db: Kysely<Database>, workspaceId: string): Promise<ApiKeySummary[]> {
  const rows = await db
    .selectFrom("api_keys")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .orderBy("id")
    .execute();
  return rows.map(toSummary);
}

/** Revokes a key of this workspace; false when the workspace has no such key. */
export async function revokeApiKey(
  db: Kysely<Database>,
  workspaceId: string,
  keyId: string,
): Promise<ApiKeySummary | null> {
  await db
    .updateTable("api_keys")
    .set({ revoked_at: nowIso() })
    .where("id", "=", keyId)
    .where("workspace_id", "=", workspaceId)
    .where("revoked_at", "is", null)
    .execute();
  const row = await db
    .selectFrom("api_keys")
    .selectAll()
    .where("id", "=", keyId)
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
  return row ? toSummary(row) : null;
}
