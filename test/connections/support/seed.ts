import type { TestPlatform } from "../../support/platform.ts";
import { storeGrant, type TokenRow } from "../../../src/connections/token-vault.ts";

export const AGENT_A = "6f1c2b3a-4d5e-4f60-8a7b-9c0d1e2f3a4b";
export const AGENT_B = "0b1c2d3e-4f50-4a6b-9c8d-7e6f5a4b3c2d";

/** A provider on a loopback URL that no test dials (for endpoints that never call the provider). */
export async function seedProvider(
  p: TestPlatform,
  providerId = "acme",
  headers: Record<string, string> = {},
): Promise<void> {
  const res = await p.api("/v2/auth/providers", {
    method: "POST",
    headers,
    json: {
      provider_id: providerId,
      name: "Acme",
      client_id: "client-1",
      client_secret: "client-secret-1",
      auth_url: "http://127.0.0.1:9/authorize",
      token_url: "http://127.0.0.1:9/token",
    },
  });
  if (res.status !== 200) throw new Error(`seeding provider failed: ${res.status} ${await res.text()}`);
}

/** A token stored straight through the vault, as a completed flow would. */
export async function seedToken(
  p: TestPlatform,
  options: {
    workspaceId?: string;
    providerId?: string;
    userId?: string;
    accessToken?: string;
    refreshToken?: string | null;
    expiresIn?: number | null;
    label?: string;
    subject?: string;
    scopes?: string[];
  } = {},
): Promise<TokenRow> {
  return storeGrant(p.ctx.db, p.ctx.box, {
    workspaceId: options.workspaceId ?? p.bootstrap.workspaceId,
    providerId: options.providerId ?? "acme",
    userId: options.userId ?? p.bootstrap.userId,
    createdBy: p.bootstrap.userId,
    tokens: {
      accessToken: options.accessToken ?? "access-seeded",
      refreshToken: options.refreshToken === undefined ? "refresh-seeded" : options.refreshToken,
      tokenType: "bearer",
      expiresIn: options.expiresIn === undefined ? 3600 : options.expiresIn,
      scopes: options.scopes ?? ["read"],
      idTokenClaims: null,
    },
    identity: { subject: options.subject ?? "subject-1", label: options.label ?? "someone@example.test" },
    requestedScopes: options.scopes ?? ["read"],
    isDefault: true,
    replaceTokenId: null,
  });
}
