import crypto from "node:crypto";
import { Hash } from "@smithy/hash-node";
import { SignatureV4, createScope, getCanonicalHeaders, getSigningKey } from "@smithy/signature-v4";
import type { HttpRequest } from "@smithy/types";
import { AwsRefusal } from "./aws-refusal.ts";
import { headerValues, type HeaderPairs } from "./header-pairs.ts";
import type { SigV4HeaderAuth } from "./sigv4-parse.ts";

export interface AwsCredentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export interface ResignInput {
  method: string;
  /** The request-target exactly as on the wire (`/path?query`); it is forwarded unchanged. */
  target: string;
  headers: HeaderPairs;
  auth: SigV4HeaderAuth;
  credentials: AwsCredentials;
  /** The payload hash of the canonical request (hex, or a literal such as `UNSIGNED-PAYLOAD`). */
  payloadHash: string;
  /** Derived signing keys of these credentials by date/region/service (the engine keeps one per rule). */
  keyCache?: Map<string, Uint8Array>;
}

export interface ResignResult {
  authorization: string;
  /** The new header signature: the seed of an aws-chunked signature chain. */
  signature: string;
  longDate: string;
  scope: string;
  signingKey: Uint8Array;
}

/** Services whose canonical URI is the wire path as is (no normalisation, no second encoding). */
const SINGLE_ENCODED_PATH_SERVICES = new Set(["s3", "s3-object-lambda", "s3-outposts", "s3express"]);

const sha256 = Hash.bind(null, "sha256");

/**
 * Drives smithy's canonicalisation steps directly instead of calling `SignatureV4.sign()`, because
 * `sign()` re-shapes the request for a client, not a proxy: it drops a signed `Date` header, sets
 * `x-amz-date` itself, and picks the signed-header set from whatever headers it is given, while a
 * re-signature must reproduce the client's exact signed-header list, date and scope. Path, query
 * and header canonicalisation (where the traps are) and key derivation are smithy's own code.
 */
class ClientShapedSigner extends SignatureV4 {
  canonicalRequest(request: HttpRequest, canonicalHeaders: Record<string, string>, payloadHash: string): string {
    return this.createCanonicalRequest(request, canonicalHeaders, payloadHash);
  }
}

const signers = new Map<boolean, ClientShapedSigner>();
function signerFor(singleEncodedPath: boolean): ClientShapedSigner {
  let signer = signers.get(singleEncodedPath);
  if (!signer) {
    // Credentials and region are unused on this path (scope and key are passed explicitly).
    signer = new ClientShapedSigner({
      service: "unused",
      region: "unused",
      credentials: { accessKeyId: "", secretAccessKey: "" },
      sha256,
      uriEscapePath: !singleEncodedPath,
    });
    signers.set(singleEncodedPath, signer);
  }
  return signer;
}

export async function resignSigV4(input: ResignInput): Promise<ResignResult> {
  const { auth } = input;
  const longDate = amzDate(input.headers, auth.scopeDate);
  const { path, query } = splitTarget(input.target);
  const canonicalHeaders = canonicalSignedHeaders(input.headers, auth.signedHeaders);
  const request = {
    method: input.method.toUpperCase(),
    protocol: "https:",
    hostname: "",
    path,
    query,
    headers: canonicalHeaders,
  } as unknown as HttpRequest;
  const signer = signerFor(SINGLE_ENCODED_PATH_SERVICES.has(auth.service));
  const canonical = signer.canonicalRequest(request, canonicalHeaders, input.payloadHash);
  const scope = createScope(auth.scopeDate, auth.region, auth.service);
  // The string to sign and the HMAC are the fixed SigV4 steps, done synchronously with node:crypto
  // (smithy's async Hash objects cost more than the signing itself on small requests).
  const stringToSign = `AWS4-HMAC-SHA256\n${longDate}\n${scope}\n${crypto.createHash("sha256").update(canonical, "utf8").digest("hex")}`;
  const signingKey = await signingKeyFor(input, scope);
  const signature = crypto.createHmac("sha256", signingKey).update(stringToSign, "utf8").digest("hex");
  const signedList = Object.keys(canonicalHeaders).sort().join(";");
  const authorization = `AWS4-HMAC-SHA256 Credential=${input.credentials.accessKeyId}/${scope}, SignedHeaders=${signedList}, Signature=${signature}`;
  return { authorization, signature, longDate, scope, signingKey };
}

async function signingKeyFor(input: ResignInput, scope: string): Promise<Uint8Array> {
  const cached = input.keyCache?.get(scope);
  if (cached) return cached;
  const key = await getSigningKey(
    sha256,
    input.credentials,
    input.auth.scopeDate,
    input.auth.region,
    input.auth.service,
  );
  if (input.keyCache) {
    if (input.keyCache.size >= 64) input.keyCache.clear();
    input.keyCache.set(scope, key);
  }
  return key;
}

/** The client's `x-amz-date`, which must agree with the scope date (AWS checks both). */
function amzDate(headers: HeaderPairs, scopeDate: string): string {
  const values = headerValues(headers, "x-amz-date");
  if (values.length !== 1 || !/^\d{8}T\d{6}Z$/.test(values[0].trim())) {
    throw new AwsRefusal("missing_amz_date", "the request must carry exactly one X-Amz-Date header (yyyymmddThhmmssZ)");
  }
  const value = values[0].trim();
  if (value.slice(0, 8) !== scopeDate)
    throw new AwsRefusal("missing_amz_date", "X-Amz-Date does not match the credential scope date");
  return value;
}

/** Only the client's signed headers; repeats joined with "," after trimming each (the SigV4 rule). */
function canonicalSignedHeaders(headers: HeaderPairs, signed: string[]): Record<string, string> {
  const bag: Record<string, string> = Object.create(null);
  for (const name of signed) {
    const values = headerValues(headers, name);
    if (values.length === 0)
      throw new AwsRefusal("missing_signed_header", `signed header ${name} is missing from the request`);
    bag[name] = values.map((v) => v.trim()).join(",");
  }
  const canonical = getCanonicalHeaders({ headers: bag } as unknown as HttpRequest, undefined, new Set(signed));
  if (Object.keys(canonical).length !== signed.length)
    throw new AwsRefusal("missing_signed_header", "a signed header could not be canonicalised");
  return canonical as Record<string, string>;
}

/**
 * The wire path (kept encoded: smithy uses it verbatim for S3 and normalises + encodes it again for
 * other services, as the SDKs did) and the query decoded into smithy's map, which smithy re-encodes
 * strictly. A raw `+` is a literal plus (`%2B`), never a space, as in every SDK's encoder.
 */
function splitTarget(target: string): { path: string; query: Record<string, string | string[]> } {
  const q = target.indexOf("?");
  const path = q === -1 ? target : target.slice(0, q);
  const query: Record<string, string | string[]> = Object.create(null);
  if (q !== -1) {
    for (const part of target.slice(q + 1).split("&")) {
      if (part === "") continue;
      const eq = part.indexOf("=");
      const key = strictDecode(eq === -1 ? part : part.slice(0, eq));
      const value = eq === -1 ? "" : strictDecode(part.slice(eq + 1));
      const prev = query[key];
      if (prev === undefined) query[key] = value;
      else if (Array.isArray(prev)) prev.push(value);
      else query[key] = [prev, value];
    }
  }
  if (!path.startsWith("/"))
    throw new AwsRefusal("malformed_query", "the request-target must be in origin form (/path?query)");
  return { path, query };
}

function strictDecode(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    throw new AwsRefusal("malformed_query", "the query string has an invalid percent-encoding");
  }
}
