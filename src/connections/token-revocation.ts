import { HttpError } from "../http/errors.ts";
import type { FlowDeps } from "./auth-flow.ts";
import { clientConfiguration, revokeAtProvider } from "./oauth-client.ts";
import { getProvider, openProviderSecret, type ProviderWithSecret } from "./provider-store.ts";
import { deleteTokenRow, openAccessToken, openRefreshToken, type TokenRow } from "./token-vault.ts";

/**
 * RFC 7009 revocation of a token's refresh token (which ends the grant at most providers) and its
 * access token. Returns false when the provider has no revocation endpoint; throws a
 * ProviderCallError when the provider fails.
 */
async function revokeRow(deps: FlowDeps, provider: ProviderWithSecret, row: TokenRow): Promise<boolean> {
  if (!provider.row.revocation_url) return false;
  const config = clientConfiguration(provider, deps.settings.providerTimeoutSeconds);
  const refresh = openRefreshToken(deps.box, row);
  if (refresh) await revokeAtProvider(provider, config, refresh, "refresh_token");
  await revokeAtProvider(provider, config, openAccessToken(deps.box, row), "access_token");
  return true;
}

/**
 * Revokes at the provider first, then deletes. When the provider fails the token is kept (so the
 * revocation can be retried) unless `force` says to delete it here anyway.
 */
export async function revokeAndDelete(deps: FlowDeps, row: TokenRow, force: boolean): Promise<{ revoked: boolean }> {
  let revoked = false;
  try {
    const provider = openProviderSecret(deps.box, await getProvider(deps.db, row.workspace_id, row.provider_id));
    revoked = await revokeRow(deps, provider, row);
  } catch (err) {
    const message = err instanceof HttpError ? String(err.detail) : (err as Error).message;
    deps.log.warn({ err, tokenId: row.id, provider: row.provider_id, reason: message }, "token revocation failed");
    if (!force)
      throw new HttpError(
        502,
        `Provider ${row.provider_id} could not revoke the token (${message}); it was kept. Retry, or pass force=true to delete it here only`,
      );
  }
  await deleteTokenRow(deps.db, row.workspace_id, row.id);
  deps.log.info({ tokenId: row.id, provider: row.provider_id, revoked }, "token deleted");
  return { revoked };
}

/** Best-effort revocation of every token of a provider (before the provider itself is deleted). */
export async function revokeAllOfProvider(deps: FlowDeps, workspaceId: string, providerId: string): Promise<void> {
  const rows = await deps.db
    .selectFrom("oauth_tokens")
    .selectAll()
    .where("workspace_id", "=", workspaceId)
    .where("provider_id", "=", providerId)
    .execute();
  if (rows.length === 0) return;
  const provider = openProviderSecret(deps.box, await getProvider(deps.db, workspaceId, providerId));
  for (const row of rows) {
    try {
      await revokeRow(deps, provider, row);
    } catch (err) {
      deps.log.warn(
        { tokenId: row.id, provider: providerId, err },
        "token revocation failed; deleting anyway with the provider",
      );
    }
  }
}
