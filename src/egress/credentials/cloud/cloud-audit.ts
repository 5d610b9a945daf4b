/**
 * Audit events of the cloud credential engines (AWS re-signing, Google tokens, callbacks).
 * The proxy supplies the sink and writes each event to the sandbox's egress log. No event ever
 * carries a credential value: no keys, signatures, tokens or injected header values; only names,
 * hosts, outcomes, reasons and timings.
 */
export type AwsPayloadMode =
  | "empty"
  | "computed-hash"
  | "literal-hash"
  | "unsigned"
  | "streaming-unsigned-trailer"
  | "streaming-signed"
  | "streaming-signed-trailer";

export type AwsRefusalReason =
  | "presigned_url"
  | "sigv4a"
  | "sigv2"
  | "malformed_authorization"
  | "missing_signed_header"
  | "missing_amz_date"
  | "unsupported_payload_mode"
  | "payload_too_large"
  | "malformed_query"
  | "malformed_chunk"
  | "chunk_too_large";

export type CloudAuditEvent =
  | {
      kind: "aws_signed";
      host: string;
      method: string;
      path: string;
      service: string;
      region: string;
      payloadMode: AwsPayloadMode;
      signedHeaders: string[];
    }
  | { kind: "aws_refused"; host: string; method: string; path: string; reason: AwsRefusalReason; message: string }
  | { kind: "aws_stream_failed"; host: string; path: string; reason: AwsRefusalReason; message: string; chunks: number }
  | { kind: "google_token_minted"; clientEmail: string; scopes: string[]; latencyMs: number; expiresInSeconds: number }
  | { kind: "google_token_failed"; clientEmail: string; scopes: string[]; latencyMs: number; message: string }
  | {
      kind: "google_bearer";
      host: string;
      method: string;
      path: string;
      cache: "hit" | "miss";
      replacedClientAuthorization: boolean;
    }
  | { kind: "google_compat_token"; host: string; path: string }
  | {
      kind: "callback_call";
      host: string;
      port: number;
      callbackUrl: string;
      status: number | null;
      latencyMs: number;
      outcome: "ok" | "error";
      reason?: string;
      headerNames?: string[];
    }
  | { kind: "callback_cache"; host: string; port: number; callbackUrl: string; cache: "hit" | "miss" | "shared" };

export type CloudAuditSink = (event: CloudAuditEvent) => void;

export const noAudit: CloudAuditSink = () => undefined; // library use and tests: no audit log

/** A URL as it may appear in the audit log: origin and path only (a query may carry a secret). */
export function auditUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.origin}${u.pathname}`;
  } catch {
    return "(invalid url)";
  }
}

/** The path part of a request-target for the audit log (no query: presigned or keyed queries). */
export function auditPath(target: string): string {
  const q = target.indexOf("?");
  return q === -1 ? target : target.slice(0, q);
}
