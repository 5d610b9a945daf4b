import type { AwsRefusalReason } from "./cloud-audit.ts";
import { headerValue, type HeaderPairs } from "./header-pairs.ts";

/**
 * Reads how a request was signed for AWS: the client's `Authorization` header (SigV4 scope,
 * signed-header list, signature) or a presigned query. Nothing here trusts the host: the scope
 * (date, region, service) is what the client's SDK computed from its own endpoint rules.
 */
export interface SigV4HeaderAuth {
  kind: "sigv4";
  accessKeyId: string;
  /** yyyymmdd of the credential scope. */
  scopeDate: string;
  region: string;
  service: string;
  /** Lower-case names in the client's order (SigV4 requires them sorted; kept as given). */
  signedHeaders: string[];
  signature: string;
}

export type SigV4Parse =
  | { kind: "unsigned" }
  | SigV4HeaderAuth
  /** A signature scheme or form the proxy does not re-sign; `accessKeyId` decides refuse vs pass. */
  | { kind: "unsupported"; accessKeyId: string | null; reason: AwsRefusalReason; message: string };

const SCOPE_PART = /^[a-z0-9-]{1,64}$/;
const SIGNED_HEADER = /^[!#$%&'*+.^_`|~0-9a-z-]+$/;

/** Parses `Authorization` and the query of `target` (the request-target exactly as on the wire). */
export function parseSigV4(headers: HeaderPairs, target: string): SigV4Parse {
  const presigned = parsePresignedQuery(target);
  if (presigned) return presigned;
  const auth = headerValue(headers, "authorization");
  if (auth === undefined) return { kind: "unsigned" };
  const trimmed = auth.trim();
  const space = trimmed.indexOf(" ");
  const algorithm = space === -1 ? trimmed : trimmed.slice(0, space);
  const rest = space === -1 ? "" : trimmed.slice(space + 1);
  if (algorithm === "AWS4-ECDSA-P256-SHA256") {
    return {
      kind: "unsupported",
      accessKeyId: credentialAccessKey(rest),
      reason: "sigv4a",
      message: "SigV4a (multi-region) signatures cannot be re-signed by the egress proxy; use a regional endpoint",
    };
  }
  if (algorithm === "AWS") {
    const akid = /^([^:\s]+):/.exec(rest)?.[1] ?? null;
    return {
      kind: "unsupported",
      accessKeyId: akid,
      reason: "sigv2",
      message: "AWS signature version 2 is not supported by the egress proxy; use SigV4",
    };
  }
  if (algorithm !== "AWS4-HMAC-SHA256") return { kind: "unsigned" };
  const fields = parseAuthFields(rest);
  const credential = fields.get("credential");
  const signedHeaders = fields.get("signedheaders");
  const signature = fields.get("signature");
  const malformed = (detail: string): SigV4Parse => ({
    kind: "unsupported",
    accessKeyId: credential?.split("/")[0] ?? null,
    reason: "malformed_authorization",
    message: `malformed SigV4 Authorization header: ${detail}`,
  });
  if (!credential || !signedHeaders || !signature)
    return malformed("Credential, SignedHeaders and Signature are required");
  const parts = credential.split("/");
  if (parts.length !== 5 || parts[4] !== "aws4_request")
    return malformed("Credential must be AKID/date/region/service/aws4_request");
  const [accessKeyId, scopeDate, region, service] = parts;
  if (!/^\d{8}$/.test(scopeDate)) return malformed("credential scope date must be yyyymmdd");
  if (!SCOPE_PART.test(region) || !SCOPE_PART.test(service))
    return malformed("credential scope region and service must be lower-case names");
  const names = signedHeaders.split(";");
  if (names.some((n) => !SIGNED_HEADER.test(n)))
    return malformed("SignedHeaders must be lower-case header names separated by ';'");
  if (new Set(names).size !== names.length) return malformed("SignedHeaders lists a header twice");
  if (!names.includes("host")) return malformed("SignedHeaders must include host");
  if (!/^[0-9a-f]{64}$/.test(signature)) return malformed("Signature must be 64 lower-case hex digits");
  return { kind: "sigv4", accessKeyId, scopeDate, region, service, signedHeaders: names, signature };
}

/** `Credential=…, SignedHeaders=…, Signature=…` (commas and/or spaces between fields). */
function parseAuthFields(rest: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const piece of rest.split(/[,\s]+/)) {
    const eq = piece.indexOf("=");
    if (eq <= 0) continue;
    const key = piece.slice(0, eq).toLowerCase();
    if (!out.has(key)) out.set(key, piece.slice(eq + 1));
  }
  return out;
}

function credentialAccessKey(rest: string): string | null {
  const credential = parseAuthFields(rest).get("credential");
  return credential ? credential.split("/")[0] || null : null;
}

/** A presigned URL (SigV4 or SigV4a query auth): `X-Amz-Algorithm` / `X-Amz-Signature` in the query. */
function parsePresignedQuery(target: string): SigV4Parse | null {
  const q = target.indexOf("?");
  if (q === -1) return null;
  let isPresigned = false;
  let accessKeyId: string | null = null;
  for (const part of target.slice(q + 1).split("&")) {
    const eq = part.indexOf("=");
    const rawKey = eq === -1 ? part : part.slice(0, eq);
    const key = safeDecode(rawKey).toLowerCase();
    if (key === "x-amz-algorithm" || key === "x-amz-signature") isPresigned = true;
    if (key === "x-amz-credential" && eq !== -1) accessKeyId = safeDecode(part.slice(eq + 1)).split("/")[0] || null;
  }
  if (!isPresigned) return null;
  return {
    kind: "unsupported",
    accessKeyId,
    reason: "presigned_url",
    message:
      "presigned URLs made with the sandbox's placeholder AWS key cannot be re-signed by the egress proxy; call the API directly",
  };
}

function safeDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
