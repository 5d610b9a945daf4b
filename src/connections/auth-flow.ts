import crypto from "node:crypto";
import type { Kysely, Selectable } from "kysely";
import type { SecretBox } from "../crypto/secret-box.ts";
import { HttpError } from "../http/errors.ts";
import type { Principal } from "../http/principal.ts";
import type { Logger } from "../log/logger.ts";
import { nowIso } from "../store/database.ts";
import { newId } from "../store/ids.ts";
import type { Database } from "../store/schema.ts";
import type { OAuthAuthRequestsTable } from "./connection-tables.ts";
import { createConnection, isConnected } from "./connection-store.ts";
import { buildAuthorizationRequest, clientConfiguration } from "./oauth-client.ts";
import { callbackUrl, getProvider, openProviderSecret } from "./provider-store.ts";
import { authorizeUrlAad, pkceVerifierAad } from "./sealed-columns.ts";
import type { ConnectionSettings } from "./settings.ts";
import type { FreshToken, TokenRefresher } from "./token-refresh.ts";
import { getOwnedToken, parseScopes, type TokenRow } from "./token-vault.ts";

export interface FlowDeps {
  db: Kysely<Database>;
  box: SecretBox;
  log: Logger;
  settings: ConnectionSettings;
  refresher: TokenRefresher;
  /** Base URL browsers reach the control plane at (WHARF_PUBLIC_URL or the listening address). */
  publicBaseUrl(): string;
  /** True once the platform shuts down: long polls end early. */
  stopping(): boolean;
}

export type AuthStatus = "completed" | "pending" | "connection_required" | "token_expired";

export interface AuthenticateRequest {
  provider: string;
  scopes: string[];
  user_id?: string | null;
  ls_user_id?: string | null;
  agent_id?: string | null;
  force_new: boolean;
  token_id?: string | null;
  is_default: boolean;
}

export interface AuthenticateResponse {
  status: AuthStatus;
  url: string | null;
  auth_id: string | null;
  token: string | null;
  user_id: string;
  metadata: Record<string, unknown> | null;
}

export type AuthRequestRow = Selectable<OAuthAuthRequestsTable>;

export const hashState = (state: string) => crypto.createHash("sha256").update(state, "utf8").digest("hex");

/** What `completed` carries beside the token: which account, and for which agent. */
function tokenMetadata(row: TokenRow, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    token_id: row.id,
    provider_id: row.provider_id,
    provider_account_label: row.provider_account_label,
    scopes: parseScopes(row.scopes),
    expires_at: row.expires_at,
    ...extra,
  };
}

const hasScopes = (row: TokenRow, wanted: string[]) => {
  const granted = new Set(parseScopes(row.scopes));
  return wanted.every((s) => granted.has(s));
};

/** Default first, then the most recent. */
const preferred = (rows: TokenRow[]) =>
  [...rows].sort((a, b) => b.is_default - a.is_default || b.created_at.localeCompare(a.created_at))[0];

interface FlowInput {
  providerId: string;
  ownerId: string;
  agentId: string | null;
  scopes: string[];
  isDefault: boolean;
  replaceTokenId: string | null;
}

/** A flow counts as reusable while this much of its lifetime is left. */
const REUSE_MARGIN_MS = 60_000;

/**
 * The same request while a flow for it is pending gets that flow back (same link, same auth_id):
 * a graph re-running its node after an interrupt, or a caller retrying, does not start another.
 */
async function reusablePendingFlow(
  deps: FlowDeps,
  workspaceId: string,
  input: FlowInput,
): Promise<{ authId: string; url: string } | null> {
  let q = deps.db
    .selectFrom("oauth_auth_requests")
    .select(["id", "url_key_id", "url_cipher"])
    .where("workspace_id", "=", workspaceId)
    .where("provider_id", "=", input.providerId)
    .where("user_id", "=", input.ownerId)
    .where("scopes", "=", JSON.stringify(input.scopes))
    .where("is_default", "=", input.isDefault ? 1 : 0)
    .where("status", "=", "pending")
    .where("expires_at", ">", new Date(Date.now() + REUSE_MARGIN_MS).toISOString())
    .where("url_cipher", "is not", null);
  q = input.agentId ? q.where("agent_id", "=", input.agentId) : q.where("agent_id", "is", null);
  q = input.replaceTokenId
    ? q.where("replace_token_id", "=", input.replaceTokenId)
    : q.where("replace_token_id", "is", null);
  const row = await q.orderBy("created_at", "desc").executeTakeFirst();
  if (!row || !row.url_key_id || !row.url_cipher) return null;
  return {
    authId: row.id,
    url: deps.box.open({ keyId: row.url_key_id, blob: row.url_cipher }, authorizeUrlAad(workspaceId, row.id)),
  };
}

/**
 * Starts a connect flow: a random `state` whose SHA-256 is stored with everything the callback
 * needs (workspace, owner, agent, provider, scopes, sealed PKCE verifier, redirect URI). The state
 * is single-use and expires; nothing in it is trusted, it only finds the row.
 */
export async function startFlow(
  deps: FlowDeps,
  principal: Principal,
  input: FlowInput,
  options: { reuse: boolean } = { reuse: true },
): Promise<{ authId: string; url: string }> {
  if (options.reuse) {
    const same = await reusablePendingFlow(deps, principal.workspaceId, input);
    if (same) return same;
  }
  const provider = openProviderSecret(deps.box, await getProvider(deps.db, principal.workspaceId, input.providerId));
  const config = clientConfiguration(provider, deps.settings.providerTimeoutSeconds);
  const state = crypto.randomBytes(32).toString("base64url");
  const redirectUri = callbackUrl(deps.publicBaseUrl(), input.providerId);
  const req = await buildAuthorizationRequest(provider, config, { redirectUri, scopes: input.scopes, state });
  const authId = newId();
  const pkce = req.codeVerifier
    ? deps.box.seal(req.codeVerifier, pkceVerifierAad(principal.workspaceId, authId))
    : null;
  const sealedUrl = deps.box.seal(req.url, authorizeUrlAad(principal.workspaceId, authId));
  const now = Date.now();
  await deps.db
    .insertInto("oauth_auth_requests")
    .values({
      id: authId,
      workspace_id: principal.workspaceId,
      provider_id: input.providerId,
      user_id: input.ownerId,
      created_by: principal.userId,
      agent_id: input.agentId,
      scopes: JSON.stringify(input.scopes),
      state_hash: hashState(state),
      pkce_key_id: pkce?.keyId ?? null,
      pkce_cipher: pkce?.blob ?? null,
      nonce: req.nonce,
      url_key_id: sealedUrl.keyId,
      url_cipher: sealedUrl.blob,
      redirect_uri: redirectUri,
      is_default: input.isDefault ? 1 : 0,
      replace_token_id: input.replaceTokenId,
      status: "pending",
      result_token_id: null,
      error: null,
      expires_at: new Date(now + deps.settings.stateTtlSeconds * 1000).toISOString(),
      created_at: new Date(now).toISOString(),
      completed_at: null,
    })
    .execute();
  return { authId, url: req.url };
}

async function findCandidate(
  deps: FlowDeps,
  workspaceId: string,
  ownerId: string,
  providerId: string,
  agentId: string | null,
): Promise<{ row: TokenRow | undefined; unattached: TokenRow[] }> {
  const owned = await deps.db
    .selectFrom("oauth_tokens")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where("user_id", "=", ownerId)
    .where("provider_id", "=", providerId)
    .execute();
  if (!agentId) return { row: preferred(owned), unattached: [] };
  const attachedIds = new Set(
    (
      await deps.db
        .selectFrom("agent_connections")
        .select("oauth_token_id")
        .where("workspace_id", "=", workspaceId)
        .where("agent_id", "=", agentId)
        .execute()
    ).map((r) => r.oauth_token_id),
  );
  const attached = owned.filter((t) => attachedIds.has(t.id));
  return { row: preferred(attached), unattached: owned.filter((t) => !attachedIds.has(t.id)) };
}

/**
 * `POST /v2/auth/authenticate`: the fresh token of the owner's account when there is one (the
 * agent's connection when an agent is named), otherwise a started flow. Statuses:
 * `completed` (token), `pending` (new flow: url, auth_id), `token_expired` (the provider refused
 * the refresh token: a re-authentication flow), `connection_required` (the owner has accounts for
 * the provider, none attached to this agent: a flow, and the accounts' ids in metadata so the
 * caller may attach one instead).
 */
export async function authenticate(
  deps: FlowDeps,
  principal: Principal,
  body: AuthenticateRequest,
): Promise<AuthenticateResponse> {
  await getProvider(deps.db, principal.workspaceId, body.provider);
  const ownerId = body.user_id ?? body.ls_user_id ?? principal.userId;
  const agentId = body.agent_id ?? null;
  const flow = async (
    status: AuthStatus,
    replaceTokenId: string | null,
    metadata: Record<string, unknown> | null = null,
  ): Promise<AuthenticateResponse> => {
    const input = {
      providerId: body.provider,
      ownerId,
      agentId,
      scopes: body.scopes,
      isDefault: body.is_default,
      replaceTokenId,
    };
    const { authId, url } = await startFlow(deps, principal, input, { reuse: !body.force_new });
    return { status, url, auth_id: authId, token: null, user_id: ownerId, metadata };
  };
  if (body.force_new) return flow("pending", null);

  let candidate: TokenRow | undefined;
  let unattached: TokenRow[] = [];
  if (body.token_id) {
    candidate = await getOwnedToken(deps.db, { workspaceId: principal.workspaceId, userId: ownerId }, body.token_id);
    if (candidate.provider_id !== body.provider)
      throw new HttpError(
        409,
        `OAuth token ${body.token_id} belongs to provider ${candidate.provider_id}, not ${body.provider}`,
      );
  } else {
    ({ row: candidate, unattached } = await findCandidate(
      deps,
      principal.workspaceId,
      ownerId,
      body.provider,
      agentId,
    ));
  }
  if (!candidate) {
    if (unattached.length)
      return flow("connection_required", null, {
        token_ids: unattached.map((t) => t.id),
        provider_account_labels: unattached.map((t) => t.provider_account_label),
      });
    return flow("pending", null);
  }
  // More scopes than granted: a new consent (the same account updates its token on return).
  if (!hasScopes(candidate, body.scopes))
    return flow("pending", null, { reason: "insufficient_scopes", token_id: candidate.id });

  const fresh: FreshToken = await deps.refresher.fresh(candidate);
  if (fresh.kind === "expired")
    return flow("token_expired", fresh.row.id, { token_id: fresh.row.id, reason: fresh.row.last_error });
  // A token picked by id for an agent is the caller choosing that account for the agent: attach it.
  let connectionId: string | undefined;
  if (agentId && body.token_id && !(await isConnected(deps.db, principal.workspaceId, agentId, fresh.row.id))) {
    connectionId = (
      await createConnection(
        deps.db,
        { workspaceId: principal.workspaceId, agentId, tokenId: fresh.row.id, createdBy: principal.userId },
        { ifMissing: true },
      )
    ).id;
  }
  return {
    status: "completed",
    url: null,
    auth_id: null,
    token: fresh.accessToken,
    user_id: ownerId,
    metadata: tokenMetadata(fresh.row, connectionId ? { connection_id: connectionId } : {}),
  };
}

export type WaitStatus = "completed" | "pending" | "timeout" | "not_found" | "failed";

export interface WaitResponse {
  status: WaitStatus;
  token: string | null;
  auth_id: string;
  error: string | null;
  metadata: Record<string, unknown> | null;
}

const WAIT_POLL_MS = 150;

/**
 * `GET /v2/auth/wait/{auth_id}`: polls the database (so the callback may land on any process)
 * until the flow completes or fails, or `timeout` seconds pass.
 */
export async function waitForAuth(
  deps: FlowDeps,
  principal: Principal,
  authId: string,
  timeoutSeconds: number,
  signal?: AbortSignal,
): Promise<WaitResponse> {
  const deadline = Date.now() + timeoutSeconds * 1000;
  const answer = (status: WaitStatus, extra: Partial<WaitResponse> = {}): WaitResponse => ({
    status,
    token: null,
    auth_id: authId,
    error: null,
    metadata: null,
    ...extra,
  });
  for (;;) {
    const row = await deps.db
      .selectFrom("oauth_auth_requests")
      .selectAll()
      .where("workspace_id", "=", principal.workspaceId)
      .where("id", "=", authId)
      .executeTakeFirst();
    if (!row) return answer("not_found");
    if (row.status === "completed" && row.result_token_id) {
      const token = await deps.db
        .selectFrom("oauth_tokens")
        .selectAll()
        .where("id", "=", row.result_token_id)
        .executeTakeFirst();
      if (!token) return answer("not_found", { error: "the connected token was deleted" });
      const fresh = await deps.refresher.fresh(token);
      if (fresh.kind === "expired")
        return answer("failed", {
          error: "the connected token needs re-authentication",
          metadata: tokenMetadata(fresh.row),
        });
      return answer("completed", {
        token: fresh.accessToken,
        metadata: tokenMetadata(fresh.row, { agent_id: row.agent_id }),
      });
    }
    if (row.status === "failed") return answer("failed", { error: row.error });
    if ((row.status === "pending" || row.status === "exchanging") && row.expires_at <= nowIso())
      return answer("failed", { error: "the connect flow expired before the provider called back" });
    if (Date.now() >= deadline || deps.stopping() || signal?.aborted) return answer("timeout");
    await new Promise((r) => setTimeout(r, Math.min(WAIT_POLL_MS, Math.max(0, deadline - Date.now()))));
  }
}

/** Forgets finished or expired flows after a day (the sweep calls it). */
export async function pruneAuthRequests(db: Kysely<Database>): Promise<number> {
  const cutoff = new Date(Date.now() - 24 * 3600 * 1000).toISOString();
  const res = await db.deleteFrom("oauth_auth_requests").where("expires_at", "<", cutoff).executeTakeFirst();
  return Number(res.numDeletedRows);
}
