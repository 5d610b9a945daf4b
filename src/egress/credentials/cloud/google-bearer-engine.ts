import { auditPath, noAudit, type CloudAuditSink } from "./cloud-audit.ts";
import { googleCompatTokenResponse } from "./google-compat-credentials.ts";
import { isGoogleApiHost, isGoogleMetadataHost, isGoogleSignedUrl, isGoogleTokenEndpoint } from "./google-hosts.ts";
import { handleMetadataRequest } from "./google-metadata-emulator.ts";
import type { GoogleServiceAccount } from "./google-service-account.ts";
import { GoogleTokenMinter, GoogleTokenUnavailable } from "./google-token-minter.ts";
import { headerValue, replaceHeader, type HeaderPairs } from "./header-pairs.ts";

/**
 * The `cloud_b` engine the proxy calls once per request to a verified destination: answers the
 * sandbox's token-endpoint calls itself, and puts the service account's access token in
 * `Authorization` on Google API hosts, replacing whatever the client sent (a dummy token or a
 * self-signed JWT made with the throwaway key).
 */
export interface GoogleOutboundRequest {
  method: string;
  host: string;
  target: string;
  headers: HeaderPairs;
}

export type GoogleOutcome =
  | { action: "pass" }
  /** Answer the sandbox with this; nothing goes upstream. */
  | { action: "respond"; status: number; headers: Record<string, string>; body: string }
  /** Forward with these headers (only `Authorization` differs). */
  | { action: "inject"; headers: HeaderPairs }
  /** Answer `502` with `error.publicMessage`; nothing goes upstream. */
  | { action: "error"; error: GoogleTokenUnavailable };

export interface GoogleBearerEngineOptions {
  serviceAccount: GoogleServiceAccount;
  scopes: string[];
  fetch?: typeof fetch;
  audit?: CloudAuditSink;
  now?: () => number;
}

export type LocalAnswer = { status: number; headers: Record<string, string>; body: string };

export interface GoogleBearerEngine {
  handle(request: GoogleOutboundRequest): Promise<GoogleOutcome>;
  /**
   * The sandbox's token-endpoint calls and metadata-server requests, answered by the proxy itself;
   * null for anything else. Nothing is dialled for these, so the proxy consults this before access
   * control: an allow list naming only the API hosts still lets client libraries get their token.
   */
  localAnswer(request: GoogleOutboundRequest): LocalAnswer | null;
  readonly minter: GoogleTokenMinter;
}

export function createGoogleBearerEngine(options: GoogleBearerEngineOptions): GoogleBearerEngine {
  const audit = options.audit ?? noAudit;
  const minter = new GoogleTokenMinter({
    serviceAccount: options.serviceAccount,
    scopes: options.scopes,
    fetch: options.fetch,
    audit,
    now: options.now,
  });
  const universe = options.serviceAccount.universeDomain;

  const metadataIdentity = {
    clientEmail: options.serviceAccount.clientEmail,
    projectId: options.serviceAccount.projectId,
    scopes: options.scopes,
    universeDomain: universe,
  };

  function localAnswer(request: GoogleOutboundRequest): LocalAnswer | null {
    const path = auditPath(request.target);
    if (isGoogleTokenEndpoint(request.host, request.method, path)) {
      audit({ kind: "google_compat_token", host: request.host, path });
      return googleCompatTokenResponse();
    }
    if (isGoogleMetadataHost(request.host))
      return handleMetadataRequest(request.method, request.target, request.headers, metadataIdentity);
    return null;
  }

  async function handle(request: GoogleOutboundRequest): Promise<GoogleOutcome> {
    const local = localAnswer(request);
    if (local) return { action: "respond", ...local };
    const path = auditPath(request.target);
    if (!isGoogleApiHost(request.host, universe)) return { action: "pass" };
    if (isGoogleSignedUrl(request.target)) return { action: "pass" };
    let minted: { token: string; cache: "hit" | "miss" };
    try {
      minted = await minter.token();
    } catch (err) {
      if (err instanceof GoogleTokenUnavailable) return { action: "error", error: err };
      throw err;
    }
    const replaced = headerValue(request.headers, "authorization") !== undefined;
    audit({
      kind: "google_bearer",
      host: request.host,
      method: request.method,
      path,
      cache: minted.cache,
      replacedClientAuthorization: replaced,
    });
    return { action: "inject", headers: replaceHeader(request.headers, "authorization", `Bearer ${minted.token}`) };
  }

  return { handle, localAnswer, minter };
}
