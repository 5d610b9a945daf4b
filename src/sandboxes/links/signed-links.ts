import crypto from "node:crypto";
import type { SecretBox } from "../../crypto/secret-box.ts";

/**
 * Tokens for links that work without a Wharf credential (download URLs, service URLs): the claims
 * as base64url JSON plus an HMAC-SHA256 with a key derived from the master key for this purpose
 * (`kid` names the master key, so a rotation does not break links minted before it while the old
 * key is in the keyring). A token names one sandbox and one thing in it, and may expire.
 */
export interface LinkClaims {
  /** sandbox id */
  s: string;
  /** workspace id */
  w: string;
  /** expiry, seconds since the epoch; null = never */
  e: number | null;
  [k: string]: unknown;
}

const b64 = (b: Buffer | string) => Buffer.from(b).toString("base64url");

export function signLink(box: SecretBox, purpose: string, claims: LinkClaims): string {
  const kid = box.activeKeyId;
  const body = b64(JSON.stringify({ ...claims, k: kid }));
  const mac = crypto
    .createHmac("sha256", box.deriveKey(`sandbox-link:${purpose}`, kid))
    .update(body)
    .digest();
  return `${body}.${b64(mac)}`;
}

/** The claims of a valid, unexpired token for `purpose`; null otherwise (the caller answers 401/403). */
export function verifyLink<T extends LinkClaims>(
  box: SecretBox,
  purpose: string,
  token: string,
  now = Date.now(),
): T | null {
  const dot = token.indexOf(".");
  if (dot <= 0 || token.length > 8192) return null;
  const body = token.slice(0, dot);
  let claims: T & { k?: unknown };
  try {
    claims = JSON.parse(Buffer.from(body, "base64url").toString("utf8"));
  } catch {
    return null; // not one of ours
  }
  if (typeof claims !== "object" || claims === null || typeof claims.k !== "string" || typeof claims.s !== "string")
    return null;
  let key: Buffer;
  try {
    key = box.deriveKey(`sandbox-link:${purpose}`, claims.k);
  } catch {
    return null; // signed with a master key that is no longer in the keyring
  }
  const want = crypto.createHmac("sha256", key).update(body).digest();
  const got = Buffer.from(token.slice(dot + 1), "base64url");
  if (got.length !== want.length || !crypto.timingSafeEqual(got, want)) return null;
  if (claims.e !== null && (typeof claims.e !== "number" || claims.e * 1000 <= now)) return null;
  return claims;
}
