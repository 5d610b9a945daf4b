import { registerRowSealedColumn } from "../secrets/rotate-master-key.ts";

/**
 * Associated data for each sealed value: it names the purpose and the row, so a ciphertext copied
 * into another row or column does not open.
 */
export const clientSecretAad = (workspaceId: string, providerRowId: string) => `oauth-client-secret:${workspaceId}:${providerRowId}`;
export const accessTokenAad = (workspaceId: string, tokenId: string) => `oauth-access-token:${workspaceId}:${tokenId}`;
export const refreshTokenAad = (workspaceId: string, tokenId: string) => `oauth-refresh-token:${workspaceId}:${tokenId}`;
export const authorizeUrlAad = (workspaceId: string, authId: string) => `oauth-authorize-url:${workspaceId}:${authId}`;
export const pkceVerifierAad = (workspaceId: string, authId: string) => `oauth-pkce-verifier:${workspaceId}:${authId}`;

/** Tells `wharf secrets rotate-key` about every column this feature seals (registration is idempotent). */
export function registerConnectionSealedColumns(): void {
  registerRowSealedColumn("oauth_providers", "client_secret_key_id", "client_secret_cipher", clientSecretAad);
  registerRowSealedColumn("oauth_tokens", "access_key_id", "access_cipher", accessTokenAad);
  registerRowSealedColumn("oauth_tokens", "refresh_key_id", "refresh_cipher", refreshTokenAad);
  registerRowSealedColumn("oauth_auth_requests", "pkce_key_id", "pkce_cipher", pkceVerifierAad);
  registerRowSealedColumn("oauth_auth_requests", "url_key_id", "url_cipher", authorizeUrlAad);
}
