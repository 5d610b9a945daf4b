/** The end of an OAuth flow: the provider's redirect claims the auth request and stores the grant. */
import { HttpError } from "../http/errors.ts";
import { nowIso } from "../store/database.ts";
import { hashState, type AuthRequestRow, type FlowDeps } from "./auth-flow.ts";
import { createConnection } from "./connection-store.ts";
import { accountIdentity, clientConfiguration, exchangeCode } from "./oauth-client.ts";
import { getProvider, openProviderSecret } from "./provider-store.ts";
import { pkceVerifierAad } from "./sealed-columns.ts";
import { parseScopes, storeGrant } from "./token-vault.ts";

export interface CallbackOutcome {
  authId: string;
  providerId: string;
  tokenId: string;
  providerAccountLabel: string | null;
  agentId: string | null;
}

async function failRequest(deps: FlowDeps, id: string, error: string): Promise<void> {
  await deps.db
    .updateTable("oauth_auth_requests")
    .set({
      status: "failed",
      error: error.slice(0, 500),
      pkce_key_id: null,
      pkce_cipher: null,
      url_key_id: null,
      url_cipher: null,
      completed_at: nowIso(),
    })
    .where("id", "=", id)
    .execute();
}

/**
 * The provider's redirect (or the front-end bridge). Claims the auth request by its state in one
 * conditional UPDATE (pending, not expired, this provider), so a replayed or late state finds
 * nothing; then exchanges the code, stores the token, attaches it to the agent, marks completion.
 */
export async function completeCallback(
  deps: FlowDeps,
  providerId: string,
  params: URLSearchParams,
): Promise<CallbackOutcome> {
  const claimed = await claimRequest(deps, providerId, params);
  try {
    return await exchangeAndStore(deps, claimed, providerId, params);
  } catch (err) {
    const message = err instanceof HttpError ? String(err.detail) : (err as Error).message;
    await failRequest(deps, claimed.id, message);
    deps.log.warn({ err, authId: claimed.id, provider: providerId, reason: message }, "connection failed");
    if (err instanceof HttpError) throw err;
    const kind = (err as { kind?: string }).kind;
    throw new HttpError(
      kind === "transient" ? 502 : 400,
      `Could not complete the connection: ${message}`.slice(0, 400),
      {},
      { cause: err },
    );
  }
}

/** The pending request this state names, now `exchanging`; a provider error or a missing code fails it. */
async function claimRequest(deps: FlowDeps, providerId: string, params: URLSearchParams): Promise<AuthRequestRow> {
  const claimed: AuthRequestRow | undefined = await deps.db
    .updateTable("oauth_auth_requests")
    .set({ status: "exchanging", url_key_id: null, url_cipher: null })
    .where("state_hash", "=", hashState(params.get("state") ?? ""))
    .where("provider_id", "=", providerId)
    .where("status", "=", "pending")
    .where("expires_at", ">", nowIso())
    .returningAll()
    .executeTakeFirst();
  if (!claimed) throw new HttpError(400, "Unknown, expired or already used state; start the connection again");

  const providerError = params.get("error");
  if (providerError) {
    const description = params.get("error_description");
    const message = `The provider returned ${providerError}${description ? `: ${description}` : ""}`;
    await failRequest(deps, claimed.id, message);
    throw new HttpError(400, message.slice(0, 300));
  }
  if (!params.get("code")) {
    await failRequest(deps, claimed.id, "the callback carried no code");
    throw new HttpError(400, "The callback carried no authorization code");
  }
  return claimed;
}

async function exchangeAndStore(
  deps: FlowDeps,
  claimed: AuthRequestRow,
  providerId: string,
  params: URLSearchParams,
): Promise<CallbackOutcome> {
  const provider = openProviderSecret(deps.box, await getProvider(deps.db, claimed.workspace_id, providerId));
  const config = clientConfiguration(provider, deps.settings.providerTimeoutSeconds);
  const codeVerifier =
    claimed.pkce_cipher && claimed.pkce_key_id
      ? deps.box.open(
          { keyId: claimed.pkce_key_id, blob: claimed.pkce_cipher },
          pkceVerifierAad(claimed.workspace_id, claimed.id),
        )
      : null;
  const tokens = await exchangeCode(provider, config, {
    redirectUri: claimed.redirect_uri,
    callbackParams: params,
    state: params.get("state") ?? "",
    codeVerifier,
    nonce: claimed.nonce,
  });
  const identity = await accountIdentity(provider, tokens, deps.settings.providerTimeoutSeconds);
  const token = await storeGrant(deps.db, deps.box, {
    workspaceId: claimed.workspace_id,
    providerId,
    userId: claimed.user_id,
    createdBy: claimed.created_by,
    tokens,
    identity,
    requestedScopes: parseScopes(claimed.scopes),
    isDefault: claimed.is_default === 1,
    replaceTokenId: claimed.replace_token_id,
  });
  if (claimed.agent_id)
    await createConnection(
      deps.db,
      {
        workspaceId: claimed.workspace_id,
        agentId: claimed.agent_id,
        tokenId: token.id,
        createdBy: claimed.created_by,
      },
      { ifMissing: true },
    );
  await markCompleted(deps, claimed.id, token.id);
  deps.log.info(
    { authId: claimed.id, provider: providerId, tokenId: token.id, agentId: claimed.agent_id },
    "connection completed",
  );
  return {
    authId: claimed.id,
    providerId,
    tokenId: token.id,
    providerAccountLabel: token.provider_account_label,
    agentId: claimed.agent_id,
  };
}

async function markCompleted(deps: FlowDeps, authId: string, tokenId: string): Promise<void> {
  await deps.db
    .updateTable("oauth_auth_requests")
    .set({
      status: "completed",
      result_token_id: tokenId,
      pkce_key_id: null,
      pkce_cipher: null,
      url_key_id: null,
      url_cipher: null,
      completed_at: nowIso(),
    })
    .where("id", "=", authId)
    .execute();
}
