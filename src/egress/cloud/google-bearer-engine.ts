import { auditPath, noAudit, type CloudAuditSink } from "./cloud-audit.ts";
import { googleCompatTokenResponse } from "./google-compat-credentials.ts";
import { isGoogleApiHost, isGoogleSignedUrl, isGoogleTokenEndpoint } from "./google-hosts.ts";
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

export interface GoogleBearerEngine {
  handle(request: GoogleOutboundRequest): Promise<GoogleOutcome>;
  readonly minter: GoogleTokenMinter;
}

export function createGoogleBearerEngine(options: GoogleBearerEngineOptions): GoogleBearerEngine {
  const audit = options.audit ?? noAudit;
  const minter = new GoogleTokenMinter({ serviceAccount: options.serviceAccount, scopes: options.scopes, fetch: options.fetch, audit, now: options.now });
  const universe = options.serviceAccount.universeDomain;

  async function handle(request: GoogleOutboundRequest): Promise<GoogleOutcome> {
    const path = auditPath(request.target);
    if (isGoogleTokenEndpoint(request.host, request.method, path)) {
      audit({ kind: "google_compat_token", host: request.host, path });
      return { action: "respond", ...googleCompatTokenResponse() };
    }
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
    audit({ kind: "google_bearer", host: request.host, method: request.method, path, cache: minted.cache, replacedClientAuthorization: replaced });
    return { action: "inject", headers: replaceHeader(request.headers, "authorization", `Bearer ${minted.token}`) };
  }

  return { handle, minter };
}
