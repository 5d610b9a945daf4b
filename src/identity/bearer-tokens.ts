import { SignJWT, jwtVerify, errors as joseErrors } from "jose";
import type { SecretBox } from "../crypto/secret-box.ts";

/**
 * Bearer tokens Wharf issues for a user: HS256 JWTs signed with a key derived from the master key
 * (the `kid` names which master key), so rotating the master key does not log everyone out while
 * the old key is still in the keyring.
 */
export interface BearerClaims {
  userId: string;
  workspaceId: string;
}

const ISSUER = "wharf";
const AUDIENCE = "wharf-api";
const PURPOSE = "bearer-jwt";

export async function issueBearerToken(
  box: SecretBox,
  claims: BearerClaims,
  ttlSeconds: number,
): Promise<{ token: string; expiresAt: string }> {
  const kid = box.activeKeyId;
  const now = Math.floor(Date.now() / 1000);
  const token = await new SignJWT({ ws: claims.workspaceId })
    .setProtectedHeader({ alg: "HS256", kid })
    .setSubject(claims.userId)
    .setIssuer(ISSUER)
    .setAudience(AUDIENCE)
    .setIssuedAt(now)
    .setExpirationTime(now + ttlSeconds)
    .sign(box.deriveKey(PURPOSE, kid));
  return { token, expiresAt: new Date((now + ttlSeconds) * 1000).toISOString() };
}

export class BearerError extends Error {}

export async function verifyBearerToken(box: SecretBox, token: string): Promise<BearerClaims> {
  try {
    const { payload } = await jwtVerify(
      token,
      async (header) => {
        if (!header.kid) throw new BearerError("token has no key id");
        return box.deriveKey(PURPOSE, header.kid);
      },
      { issuer: ISSUER, audience: AUDIENCE, algorithms: ["HS256"] },
    );
    if (typeof payload.sub !== "string" || typeof payload.ws !== "string")
      throw new BearerError("token lacks subject or workspace");
    return { userId: payload.sub, workspaceId: payload.ws };
  } catch (err) {
    if (err instanceof joseErrors.JWTExpired) throw new BearerError("bearer token expired");
    if (err instanceof BearerError) throw err;
    throw new BearerError("invalid bearer token");
  }
}
