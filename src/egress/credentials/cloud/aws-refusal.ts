import type { AwsRefusalReason } from "./cloud-audit.ts";

/** Why a request signed with the placeholder key is not re-signed; the proxy answers with it. */
export class AwsRefusal extends Error {
  constructor(
    readonly reason: AwsRefusalReason,
    message: string,
    readonly status: number = statusFor(reason),
  ) {
    super(message);
    this.name = "AwsRefusal";
  }
}

function statusFor(reason: AwsRefusalReason): number {
  if (reason === "payload_too_large" || reason === "chunk_too_large") return 413;
  if (
    reason === "malformed_authorization" ||
    reason === "malformed_query" ||
    reason === "malformed_chunk" ||
    reason === "missing_amz_date" ||
    reason === "missing_signed_header"
  )
    return 400;
  return 403;
}

/**
 * The answer the proxy sends the sandbox for a refusal: S3-style XML, which every AWS SDK parses
 * into an error whose code and message the agent sees.
 */
export function awsRefusalResponse(refusal: AwsRefusal): {
  status: number;
  headers: Record<string, string>;
  body: string;
} {
  const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const body = `<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>WharfEgressRefused</Code><Message>${esc(`wharf egress proxy: ${refusal.message} (${refusal.reason})`)}</Message></Error>\n`;
  return {
    status: refusal.status,
    headers: { "content-type": "application/xml", "x-wharf-egress-refused": refusal.reason },
    body,
  };
}
