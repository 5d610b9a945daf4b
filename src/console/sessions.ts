import crypto from "node:crypto";
import type { Kysely } from "kysely";
import { noteApiKeyUse } from "../identity/api-keys.ts";
import { nowIso } from "../store/database.ts";
import type { Database } from "../store/schema.ts";
import "./session-tables.ts";

export const SESSION_COOKIE = "wharf_session";
/**
 * The paths the console calls with its session (the API, the sandboxes' data planes, its own
 * session endpoint): the cookie is set once for each, so it is never sent anywhere else on the
 * origin (not to a deployment's stable URL, a download link or a sandbox's service).
 */
export const SESSION_COOKIE_PATHS = ["/v2", "/sandboxes/dp", "/console/api"];
/** Absolute lifetime of a console session; sign in again after it. */
export const SESSION_TTL_SECONDS = 12 * 3600;

export interface SessionOwner {
  userId: string;
  workspaceId: string;
  apiKeyId: string | null;
  expiresAt: string;
}

function hashSession(value: string): string {
  return crypto.createHash("sha256").update(value).digest("hex");
}

/** The session cookie's value from a Cookie header, or null. */
export function sessionCookieOf(cookieHeader: string | null): string | null {
  if (!cookieHeader) return null;
  for (const part of cookieHeader.split(";")) {
    const eq = part.indexOf("=");
    if (eq > 0 && part.slice(0, eq).trim() === SESSION_COOKIE) {
      const v = part.slice(eq + 1).trim();
      return /^[A-Za-z0-9_-]{43}$/.test(v) ? v : null;
    }
  }
  return null;
}

/** Opens a session for a principal; the returned value goes into the cookie and nowhere else. */
export async function openSession(
  db: Kysely<Database>,
  owner: {
    userId: string;
    workspaceId: string;
    apiKeyId: string | null;
    scheme: "api_key" | "bearer";
    notAfter?: string;
  },
): Promise<{ value: string; expiresAt: string }> {
  const value = crypto.randomBytes(32).toString("base64url");
  let expiresAt = new Date(Date.now() + SESSION_TTL_SECONDS * 1000).toISOString();
  if (owner.notAfter && owner.notAfter < expiresAt) expiresAt = owner.notAfter;
  await db
    .insertInto("console_sessions")
    .values({
      id_hash: hashSession(value),
      user_id: owner.userId,
      workspace_id: owner.workspaceId,
      api_key_id: owner.apiKeyId,
      signed_in_with: owner.scheme,
      created_at: nowIso(),
      expires_at: expiresAt,
    })
    .execute();
  return { value, expiresAt };
}

/** The owner of a live session: unknown, expired, signed-out sessions and revoked keys give null. */
export async function resolveSession(db: Kysely<Database>, value: string): Promise<SessionOwner | null> {
  const row = await db
    .selectFrom("console_sessions")
    .selectAll()
    .where("id_hash", "=", hashSession(value))
    .executeTakeFirst();
  if (!row || row.expires_at <= nowIso()) return null;
  if (row.api_key_id) {
    const key = await db
      .selectFrom("api_keys")
      .select(["revoked_at", "expires_at", "last_used_at"])
      .where("id", "=", row.api_key_id)
      .executeTakeFirst();
    if (!key || key.revoked_at || (key.expires_at && key.expires_at <= nowIso())) return null;
    // A session is a use of the key it was opened with: the keys page shows it as used, not "—".
    await noteApiKeyUse(db, row.api_key_id, key.last_used_at);
  }
  return { userId: row.user_id, workspaceId: row.workspace_id, apiKeyId: row.api_key_id, expiresAt: row.expires_at };
}

/** Signs out: the session stops working at once, on every process sharing the database. */
export async function closeSession(db: Kysely<Database>, value: string): Promise<void> {
  await db.deleteFrom("console_sessions").where("id_hash", "=", hashSession(value)).execute();
  // Expired rows are useless; drop them while we are here rather than running a sweeper.
  await db.deleteFrom("console_sessions").where("expires_at", "<=", nowIso()).execute();
}
