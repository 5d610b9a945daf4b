import type { Kysely, Selectable, Transaction } from "kysely";
import type { SecretBox } from "../crypto/secret-box.ts";
import { notFound } from "../http/errors.ts";
import { nowIso } from "../store/database.ts";
import { newId } from "../store/ids.ts";
import type { Database } from "../store/schema.ts";
import type { OAuthTokensTable } from "./connection-tables.ts";
import type { AccountIdentity, TokenSet } from "./oauth-client.ts";
import { accessTokenAad, refreshTokenAad } from "./sealed-columns.ts";

export type TokenRow = Selectable<OAuthTokensTable>;

/** What the API shows of a token: never the token itself. */
export interface TokenSummary {
  id: string;
  provider_id: string;
  provider_account_label: string | null;
  scopes: string[];
  expires_at: string | null;
  is_default: boolean;
  status: string;
  user_id: string;
  created_at: string;
  updated_at: string;
}

export const parseScopes = (json: string): string[] => JSON.parse(json) as string[];

export function toTokenSummary(row: TokenRow): TokenSummary {
  return {
    id: row.id,
    provider_id: row.provider_id,
    provider_account_label: row.provider_account_label,
    scopes: parseScopes(row.scopes),
    expires_at: row.expires_at,
    is_default: row.is_default === 1,
    status: row.status,
    user_id: row.user_id,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export const expiresAtFrom = (expiresIn: number | null, now = Date.now()): string | null =>
  expiresIn === null ? null : new Date(now + expiresIn * 1000).toISOString();

export function openAccessToken(box: SecretBox, row: TokenRow): string {
  return box.open({ keyId: row.access_key_id, blob: row.access_cipher }, accessTokenAad(row.workspace_id, row.id));
}

export function openRefreshToken(box: SecretBox, row: TokenRow): string | null {
  if (!row.refresh_cipher || !row.refresh_key_id) return null;
  return box.open({ keyId: row.refresh_key_id, blob: row.refresh_cipher }, refreshTokenAad(row.workspace_id, row.id));
}

/** The sealed columns for a token set; a set without a refresh token leaves the stored one alone. */
export function sealedTokenColumns(box: SecretBox, workspaceId: string, tokenId: string, tokens: TokenSet) {
  const access = box.seal(tokens.accessToken, accessTokenAad(workspaceId, tokenId));
  const refresh = tokens.refreshToken ? box.seal(tokens.refreshToken, refreshTokenAad(workspaceId, tokenId)) : null;
  return {
    access_key_id: access.keyId,
    access_cipher: access.blob,
    ...(refresh ? { refresh_key_id: refresh.keyId, refresh_cipher: refresh.blob } : {}),
  };
}

async function makeDefault(
  tx: Transaction<Database>,
  row: { workspace_id: string; user_id: string; provider_id: string; id: string },
): Promise<void> {
  await tx
    .updateTable("oauth_tokens")
    .set({ is_default: 0 })
    .where("workspace_id", "=", row.workspace_id)
    .where("user_id", "=", row.user_id)
    .where("provider_id", "=", row.provider_id)
    .where("id", "!=", row.id)
    .where("is_default", "=", 1)
    .execute();
  await tx.updateTable("oauth_tokens").set({ is_default: 1 }).where("id", "=", row.id).execute();
}

export interface StoreGrant {
  workspaceId: string;
  providerId: string;
  userId: string;
  createdBy: string;
  tokens: TokenSet;
  identity: AccountIdentity;
  requestedScopes: string[];
  isDefault: boolean;
  /** A token the flow re-authenticates; replaced only if the same account (or an unknown one) came back. */
  replaceTokenId: string | null;
}

/**
 * Stores the result of a completed flow in one transaction. The same provider account of the same
 * owner updates its token instead of adding a second one; a different account adds a token, so
 * several accounts per provider live side by side, told apart by their labels, one the default.
 */
export async function storeGrant(db: Kysely<Database>, box: SecretBox, g: StoreGrant): Promise<TokenRow> {
  return db.transaction().execute(async (tx) => {
    const mine = tx
      .selectFrom("oauth_tokens")
      .selectAll()
      .where("workspace_id", "=", g.workspaceId)
      .where("user_id", "=", g.userId)
      .where("provider_id", "=", g.providerId);
    let existing: TokenRow | undefined;
    if (g.replaceTokenId) {
      const r = await mine.where("id", "=", g.replaceTokenId).executeTakeFirst();
      if (r && (r.account_subject === null || g.identity.subject === null || r.account_subject === g.identity.subject))
        existing = r;
    }
    if (!existing && g.identity.subject !== null)
      existing = await mine
        .where("account_subject", "=", g.identity.subject)
        .orderBy("created_at", "desc")
        .executeTakeFirst();
    const others = await mine
      .select("id as other_id")
      .where("id", "!=", existing?.id ?? "")
      .executeTakeFirst();
    const now = nowIso();
    const id = existing?.id ?? newId();
    const fields = {
      ...sealedTokenColumns(box, g.workspaceId, id, g.tokens),
      provider_account_label: g.identity.label ?? existing?.provider_account_label ?? null,
      account_subject: g.identity.subject ?? existing?.account_subject ?? null,
      scopes: JSON.stringify(g.tokens.scopes ?? g.requestedScopes),
      token_type: g.tokens.tokenType,
      expires_at: expiresAtFrom(g.tokens.expiresIn),
      status: "active",
      refresh_lease_until: null,
      refresh_lease_owner: null,
      last_refreshed_at: null,
      last_error: null,
      updated_at: now,
    };
    if (existing) {
      await tx
        .updateTable("oauth_tokens")
        .set((eb) => ({ ...fields, generation: eb("generation", "+", 1) }))
        .where("id", "=", id)
        .execute();
    } else {
      await tx
        .insertInto("oauth_tokens")
        .values({
          id,
          workspace_id: g.workspaceId,
          provider_id: g.providerId,
          user_id: g.userId,
          refresh_key_id: null,
          refresh_cipher: null,
          ...fields,
          is_default: 0,
          generation: 1,
          created_by: g.createdBy,
          created_at: now,
        })
        .execute();
    }
    if (g.isDefault || !others)
      await makeDefault(tx, { id, workspace_id: g.workspaceId, user_id: g.userId, provider_id: g.providerId });
    return tx.selectFrom("oauth_tokens").selectAll().where("id", "=", id).executeTakeFirstOrThrow();
  });
}

export interface TokenOwner {
  workspaceId: string;
  userId: string;
}

export async function listTokens(db: Kysely<Database>, owner: TokenOwner, providerId?: string): Promise<TokenRow[]> {
  let q = db
    .selectFrom("oauth_tokens")
    .selectAll()
    .where("workspace_id", "=", owner.workspaceId)
    .where("user_id", "=", owner.userId);
  if (providerId) q = q.where("provider_id", "=", providerId);
  return q.orderBy("provider_id").orderBy("created_at").execute();
}

export async function getOwnedToken(db: Kysely<Database>, owner: TokenOwner, tokenId: string): Promise<TokenRow> {
  const row = await db
    .selectFrom("oauth_tokens")
    .selectAll()
    .where("workspace_id", "=", owner.workspaceId)
    .where("user_id", "=", owner.userId)
    .where("id", "=", tokenId)
    .executeTakeFirst();
  if (!row) throw notFound("OAuth token");
  return row;
}

export async function getWorkspaceToken(
  db: Kysely<Database>,
  workspaceId: string,
  tokenId: string,
): Promise<TokenRow | undefined> {
  return db
    .selectFrom("oauth_tokens")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where("id", "=", tokenId)
    .executeTakeFirst();
}

export async function reloadToken(db: Kysely<Database>, tokenId: string): Promise<TokenRow | undefined> {
  return db.selectFrom("oauth_tokens").selectAll().where("id", "=", tokenId).executeTakeFirst();
}

export async function setTokenMetadata(
  db: Kysely<Database>,
  owner: TokenOwner,
  tokenId: string,
  patch: { provider_account_label?: string | null; is_default?: boolean | null },
): Promise<TokenRow> {
  return db.transaction().execute(async (tx) => {
    const row = await tx
      .selectFrom("oauth_tokens")
      .selectAll()
      .where("workspace_id", "=", owner.workspaceId)
      .where("user_id", "=", owner.userId)
      .where("id", "=", tokenId)
      .executeTakeFirst();
    if (!row) throw notFound("OAuth token");
    const now = nowIso();
    if (patch.provider_account_label !== undefined)
      await tx
        .updateTable("oauth_tokens")
        .set({ provider_account_label: patch.provider_account_label, updated_at: now })
        .where("id", "=", tokenId)
        .execute();
    if (patch.is_default === true) await makeDefault(tx, row);
    else if (patch.is_default === false)
      await tx.updateTable("oauth_tokens").set({ is_default: 0, updated_at: now }).where("id", "=", tokenId).execute();
    return tx.selectFrom("oauth_tokens").selectAll().where("id", "=", tokenId).executeTakeFirstOrThrow();
  });
}

export async function deleteTokenRow(db: Kysely<Database>, workspaceId: string, tokenId: string): Promise<boolean> {
  const res = await db
    .deleteFrom("oauth_tokens")
    .where("workspace_id", "=", workspaceId)
    .where("id", "=", tokenId)
    .executeTakeFirst();
  return Number(res.numDeletedRows) > 0;
}
