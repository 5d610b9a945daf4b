import type { Context } from "hono";
import type { Kysely } from "kysely";
import type { SecretBox } from "../crypto/secret-box.ts";
import { resolveApiKey } from "../identity/api-keys.ts";
import { BearerError, verifyBearerToken } from "../identity/bearer-tokens.ts";
import { isMember } from "../identity/workspaces.ts";
import { cookieRequestRefusal, resolveSession, sessionCookieOf } from "../console/index.ts";
import type { Database } from "../store/schema.ts";
import { forbidden, unauthorized } from "./errors.ts";
import type { AppEnv, Principal } from "./principal.ts";

const UUIDISH = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * Resolves the caller from `X-Api-Key` or `Authorization: Bearer`, then the workspace: the key's
 * (or token's) own, or the one named by `X-Tenant-Id` when the caller's user is a member of it.
 * A tenant id alone never authenticates. Without either header, the console's session cookie
 * (`src/console/`), with its CSRF rules; `method` is the request's (unknown counts as unsafe).
 */
export function createAuthenticator(db: Kysely<Database>, box: SecretBox) {
  return async function authenticate(headers: Headers, method?: string): Promise<Principal> {
    const apiKey = headers.get("x-api-key");
    const authorization = headers.get("authorization");
    let principal: Principal;
    if (apiKey) {
      const owner = await resolveApiKey(db, apiKey.trim());
      if (!owner) throw unauthorized("Invalid or revoked API key");
      principal = { userId: owner.userId, workspaceId: owner.workspaceId, scheme: "api_key", apiKeyId: owner.keyId };
    } else if (authorization && /^bearer\s+/i.test(authorization)) {
      try {
        const claims = await verifyBearerToken(box, authorization.replace(/^bearer\s+/i, "").trim());
        principal = { userId: claims.userId, workspaceId: claims.workspaceId, scheme: "bearer", apiKeyId: null };
      } catch (err) {
        throw unauthorized(err instanceof BearerError ? err.message : "invalid bearer token");
      }
    } else if (sessionCookieOf(headers.get("cookie"))) {
      const value = sessionCookieOf(headers.get("cookie"))!;
      const owner = await resolveSession(db, value);
      if (!owner) throw unauthorized("Console session expired or signed out");
      const refusal = cookieRequestRefusal({ method, headers, sessionValue: value });
      if (refusal) throw forbidden(refusal);
      principal = { userId: owner.userId, workspaceId: owner.workspaceId, scheme: "session", apiKeyId: null };
    } else {
      throw unauthorized("Missing credentials: send an X-Api-Key header or Authorization: Bearer <token>");
    }
    const tenant = headers.get("x-tenant-id")?.trim();
    if (tenant && tenant !== principal.workspaceId) {
      // Same answer for a workspace that does not exist and one the caller is not in: no existence leak.
      if (!UUIDISH.test(tenant) || !(await isMember(db, principal.userId, tenant))) {
        throw forbidden("X-Tenant-Id names a workspace this credential cannot act on");
      }
      principal = { ...principal, workspaceId: tenant };
    }
    return principal;
  };
}

export type Authenticate = ReturnType<typeof createAuthenticator>;

/** The principal of a Hono request, authenticated once and remembered on the context. */
export function principalOf(authenticate: Authenticate) {
  return async (c: Context<AppEnv>): Promise<Principal> => {
    const known = c.get("principal");
    if (known) return known;
    const principal = await authenticate(c.req.raw.headers, c.req.method);
    c.set("principal", principal);
    return principal;
  };
}
