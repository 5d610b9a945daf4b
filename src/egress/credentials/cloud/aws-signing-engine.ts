import crypto from "node:crypto";
import { Readable } from "node:stream";
import { AwsChunkedResigner, DEFAULT_MAX_CHUNK_BYTES } from "./aws-chunked-resign.ts";
import { isAwsHost } from "./aws-hosts.ts";
import { AwsRefusal } from "./aws-refusal.ts";
import { auditPath, noAudit, type AwsPayloadMode, type CloudAuditSink } from "./cloud-audit.ts";
import { headerValue, headerValues, replaceHeader, withoutHeaders, type HeaderPairs } from "./header-pairs.ts";
import { isAwsPlaceholderAccessKeyId } from "./placeholder-credentials.ts";
import { parseSigV4, type SigV4HeaderAuth } from "./sigv4-parse.ts";
import { resignSigV4, type AwsCredentials } from "./sigv4-resign.ts";

/**
 * The `cloud_a` engine the proxy calls once per request, after it has fixed and verified the
 * destination and before it writes anything upstream. It never changes the request-target, the
 * body's bytes or their length: only `Authorization` is replaced (and a placeholder
 * `x-amz-security-token` dropped), and an aws-chunked signed body is re-signed chunk by chunk.
 */
export interface AwsOutboundRequest {
  method: string;
  /** The proxy's canonical destination host (lower case, no trailing dot, no port). */
  host: string;
  /** The request-target exactly as received and as it will be forwarded (origin form). */
  target: string;
  /** Request headers as received (raw pairs, hop-by-hop framing headers may be included). */
  headers: HeaderPairs;
  /** The request body, or null when the request has none. */
  body: Readable | null;
}

export type AwsOutcome =
  /** Not ours (no placeholder signature, or not an AWS host): forward untouched. */
  | { action: "pass" }
  /** Answer the sandbox with `awsRefusalResponse(refusal)`; nothing goes upstream. */
  | { action: "refuse"; refusal: AwsRefusal }
  /** Forward with these headers and this body (same byte length as the original). */
  | { action: "signed"; headers: HeaderPairs; body: Readable | null; payloadMode: AwsPayloadMode };

export interface AwsSigningEngineOptions {
  credentials: AwsCredentials;
  /** Bodies whose hash the proxy must compute itself (no x-amz-content-sha256) are buffered up to this. */
  maxBufferedPayloadBytes?: number;
  maxChunkBytes?: number;
  /** Operator-configured extra endpoint suffixes (e.g. an on-premises S3); never from proxy_config. */
  extraHostSuffixes?: readonly string[];
  audit?: CloudAuditSink;
}

export const DEFAULT_MAX_BUFFERED_PAYLOAD_BYTES = 64 * 1024 * 1024;
const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

export interface AwsSigningEngine {
  handle(request: AwsOutboundRequest): Promise<AwsOutcome>;
}

/** What one engine keeps between requests: its options and the derived signing keys. */
interface EngineState {
  options: AwsSigningEngineOptions;
  audit: CloudAuditSink;
  maxBuffered: number;
  maxChunk: number;
  extra: readonly string[];
  keyCache: Map<string, Uint8Array>;
}

export function createAwsSigningEngine(options: AwsSigningEngineOptions): AwsSigningEngine {
  const s: EngineState = {
    options,
    audit: options.audit ?? noAudit,
    maxBuffered: options.maxBufferedPayloadBytes ?? DEFAULT_MAX_BUFFERED_PAYLOAD_BYTES,
    maxChunk: options.maxChunkBytes ?? DEFAULT_MAX_CHUNK_BYTES,
    extra: options.extraHostSuffixes ?? [],
    keyCache: new Map<string, Uint8Array>(),
  };
  return { handle: (request) => handle(s, request) };
}

async function handle(s: EngineState, request: AwsOutboundRequest): Promise<AwsOutcome> {
  const parsed = parseSigV4(request.headers, request.target);
  if (parsed.kind === "unsigned") return { action: "pass" };
  const accessKeyId = parsed.kind === "sigv4" ? parsed.accessKeyId : parsed.accessKeyId;
  // Only the sandbox's placeholder key is ours; anything else (a real key, a presigned URL from
  // another service) passes untouched and stands or falls on its own signature.
  if (accessKeyId === null || !isAwsPlaceholderAccessKeyId(accessKeyId)) return { action: "pass" };
  // A placeholder signature to a non-AWS host is never signed with the real keys.
  if (!isAwsHost(request.host, s.extra)) return { action: "pass" };
  const path = auditPath(request.target);
  const refuse = (refusal: AwsRefusal): AwsOutcome => {
    s.audit({
      kind: "aws_refused",
      host: request.host,
      method: request.method,
      path,
      reason: refusal.reason,
      message: refusal.message,
    });
    return { action: "refuse", refusal };
  };
  if (parsed.kind === "unsupported") return refuse(new AwsRefusal(parsed.reason, parsed.message));
  try {
    const result = await sign(s, request, parsed);
    s.audit({
      kind: "aws_signed",
      host: request.host,
      method: request.method,
      path,
      service: parsed.service,
      region: parsed.region,
      payloadMode: result.payloadMode,
      signedHeaders: parsed.signedHeaders,
    });
    return result;
  } catch (err) {
    if (err instanceof AwsRefusal) return refuse(err);
    throw err;
  }
}

async function sign(
  s: EngineState,
  request: AwsOutboundRequest,
  auth: SigV4HeaderAuth,
): Promise<AwsOutcome & { action: "signed" }> {
  const contentSha = headerValues(request.headers, "x-amz-content-sha256").map((v) => v.trim());
  if (contentSha.length > 1)
    throw new AwsRefusal("unsupported_payload_mode", "x-amz-content-sha256 appears more than once");
  const declared = contentSha[0];
  let headers = request.headers;
  // Long-term keys have no session token; a token the sandbox invented cannot be valid with them.
  let signedHeaders = auth.signedHeaders;
  if (headerValue(headers, "x-amz-security-token") !== undefined) {
    headers = withoutHeaders(headers, ["x-amz-security-token"]);
    signedHeaders = signedHeaders.filter((h) => h !== "x-amz-security-token");
  }
  const effectiveAuth = { ...auth, signedHeaders };
  const base = {
    method: request.method,
    target: request.target,
    headers,
    auth: effectiveAuth,
    credentials: s.options.credentials,
    keyCache: s.keyCache,
  };
  const done = (authorization: string, body: Readable | null, payloadMode: AwsPayloadMode) => ({
    action: "signed" as const,
    headers: replaceHeader(headers, "authorization", authorization),
    body,
    payloadMode,
  });

  if (declared === undefined) {
    // The client hashed the body itself without saying so (most non-S3 services): the proxy
    // must hash it too, which needs the whole body before the headers can go.
    const buffered = await bufferBody(request.body, s.maxBuffered);
    const hash = buffered.length === 0 ? EMPTY_SHA256 : crypto.createHash("sha256").update(buffered).digest("hex");
    const signed = await resignSigV4({ ...base, payloadHash: hash });
    const body = request.body === null ? null : Readable.from(buffered.length === 0 ? [] : [buffered]);
    return done(signed.authorization, body, buffered.length === 0 ? "empty" : "computed-hash");
  }
  if (/^[0-9a-f]{64}$/.test(declared)) {
    // The body goes upstream byte for byte, so the hash the client declared and signed stays
    // the one the server checks it against: no buffering, any size.
    const signed = await resignSigV4({ ...base, payloadHash: declared });
    return done(signed.authorization, request.body, "literal-hash");
  }
  if (declared === "UNSIGNED-PAYLOAD" || declared === "STREAMING-UNSIGNED-PAYLOAD-TRAILER") {
    const signed = await resignSigV4({ ...base, payloadHash: declared });
    return done(
      signed.authorization,
      request.body,
      declared === "UNSIGNED-PAYLOAD" ? "unsigned" : "streaming-unsigned-trailer",
    );
  }
  if (declared === "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" || declared === "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER") {
    if (request.body === null) throw new AwsRefusal("malformed_chunk", "a streaming-signed request has no body");
    const signed = await resignSigV4({ ...base, payloadHash: declared });
    const resigner = new AwsChunkedResigner({
      signingKey: signed.signingKey,
      longDate: signed.longDate,
      scope: signed.scope,
      seedSignature: signed.signature,
      maxChunkBytes: s.maxChunk,
      onError: (refusal, chunks) =>
        s.audit({
          kind: "aws_stream_failed",
          host: request.host,
          path: auditPath(request.target),
          reason: refusal.reason,
          message: refusal.message,
          chunks,
        }),
    });
    request.body.on("error", (err) => resigner.destroy(err));
    request.body.pipe(resigner);
    return done(
      signed.authorization,
      resigner,
      declared.endsWith("-TRAILER") ? "streaming-signed-trailer" : "streaming-signed",
    );
  }
  if (declared.startsWith("STREAMING-AWS4-ECDSA"))
    throw new AwsRefusal("sigv4a", "SigV4a streaming signatures cannot be re-signed by the egress proxy");
  throw new AwsRefusal("unsupported_payload_mode", `unsupported x-amz-content-sha256 value`);
}

async function bufferBody(body: Readable | null, max: number): Promise<Buffer> {
  if (body === null) return Buffer.alloc(0);
  const parts: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    const b = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    size += b.length;
    if (size > max) {
      throw new AwsRefusal(
        "payload_too_large",
        `the request has no x-amz-content-sha256 header, so the proxy must hash its body before re-signing, and the body exceeds the ${max}-byte limit; send x-amz-content-sha256 (a hash or UNSIGNED-PAYLOAD)`,
      );
    }
    parts.push(b);
  }
  return Buffer.concat(parts, size);
}
