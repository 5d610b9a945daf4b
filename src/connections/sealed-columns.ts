/**
 * Associated data for each sealed value: it names the purpose and the row, so a ciphertext copied
 * into another row or column does not open.
 */
export const clientSecretAad = (workspaceId: string, providerRowId: string) =>
  `oauth-client-secret:${workspaceId}:${providerRowId}`;
export const accessTokenAad = (workspaceId: string, tokenId: string) => `oauth-access-token:${workspaceId}:${tokenId}`;
export const refreshTokenAad = (workspaceId: string, tokenId: string) =>
  `oauth-refresh-token:${workspaceId}:${tokenId}`;
export const authorizeUrlAad = (workspaceId: string, authId: string) => `oauth-authorize-url:${workspaceId}:${authId}`;
export const pkceVerifierAad = (workspaceId: string, authId: string) => `oauth-pkce-verifier:${workspaceId}:${authId}`;

// Key rotation finds these columns in src/secrets/sealed-columns.ts (`connections.*`).
