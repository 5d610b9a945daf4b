import * as client from "openid-client";
import type { ProviderWithSecret } from "./provider-store.ts";

/**
 * The OAuth client side of a provider, built on openid-client: authorization URL, code exchange,
 * refresh, RFC 7009 revocation and the account identity. One Configuration per call keeps no state
 * between requests, so every process of the platform behaves the same.
 */

export interface TokenSet {
  accessToken: string;
  refreshToken: string | null;
  tokenType: string;
  /** Seconds until the access token expires, when the provider says. */
  expiresIn: number | null;
  /** Granted scopes when the provider says (RFC 6749 §5.1: absent means "as requested"). */
  scopes: string[] | null;
  idTokenClaims: Record<string, unknown> | null;
}

/** Why a call to a provider failed: `invalid_grant` ends a token, `transient` may be retried. */
export type ProviderFailureKind = "invalid_grant" | "transient" | "rejected";

export class ProviderCallError extends Error {
  constructor(
    readonly kind: ProviderFailureKind,
    message: string,
    readonly oauthError: string | null = null,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

const isHttp = (u: string | null) => u !== null && u.startsWith("http:");

/**
 * Providers that are plain OAuth 2 (no issuer declared) may still answer with an id_token, which
 * openid-client would try to validate against an issuer we do not know. Such an id_token is
 * dropped: the label then comes from userinfo, and a provider that wants id_token labels declares
 * its issuer.
 */
function dropIdToken(tokenUrl: string): client.CustomFetch {
  return async (url, options) => {
    const res = await fetch(url, options as RequestInit);
    if (url !== tokenUrl || !res.ok || !(res.headers.get("content-type") ?? "").includes("json")) return res;
    const body = (await res.json()) as Record<string, unknown>;
    delete body.id_token;
    const headers = new Headers(res.headers);
    headers.delete("content-length");
    headers.delete("content-encoding");
    return new Response(JSON.stringify(body), { status: res.status, statusText: res.statusText, headers });
  };
}

export function clientConfiguration(provider: ProviderWithSecret, timeoutSeconds: number): client.Configuration {
  const { row, clientSecret } = provider;
  const server: client.ServerMetadata = {
    // Without a declared issuer a stand-in is used; nothing is validated against it (see dropIdToken).
    issuer: row.issuer ?? new URL(row.auth_url).origin,
    authorization_endpoint: row.auth_url,
    token_endpoint: row.token_url,
    ...(row.revocation_url ? { revocation_endpoint: row.revocation_url } : {}),
    ...(row.userinfo_url ? { userinfo_endpoint: row.userinfo_url } : {}),
  };
  const auth =
    row.token_endpoint_auth_method === "none"
      ? client.None()
      : row.token_endpoint_auth_method === "client_secret_basic"
        ? client.ClientSecretBasic(clientSecret ?? "")
        : client.ClientSecretPost(clientSecret ?? "");
  const config = new client.Configuration(server, row.client_id, undefined, auth);
  config.timeout = timeoutSeconds;
  if ([row.auth_url, row.token_url, row.revocation_url, row.userinfo_url, row.issuer].some(isHttp))
    client.allowInsecureRequests(config);
  if (!row.issuer) config[client.customFetch] = dropIdToken(row.token_url);
  return config;
}

export interface AuthorizationRequest {
  url: string;
  codeVerifier: string | null;
  nonce: string | null;
}

export async function buildAuthorizationRequest(
  provider: ProviderWithSecret,
  config: client.Configuration,
  options: { redirectUri: string; scopes: string[]; state: string },
): Promise<AuthorizationRequest> {
  const { row } = provider;
  const params: Record<string, string> = {
    ...(JSON.parse(row.extra_authorize_params) as Record<string, string>),
    redirect_uri: options.redirectUri,
    response_type: "code",
    state: options.state,
  };
  if (options.scopes.length) params.scope = options.scopes.join(row.scope_separator);
  let codeVerifier: string | null = null;
  if (row.uses_pkce === 1) {
    codeVerifier = client.randomPKCECodeVerifier();
    params.code_challenge = await client.calculatePKCECodeChallenge(codeVerifier);
    params.code_challenge_method = "S256";
  }
  // A nonce only where an id_token will be validated (OpenID scope and a declared issuer).
  let nonce: string | null = null;
  if (row.issuer && options.scopes.includes("openid")) {
    nonce = client.randomNonce();
    params.nonce = nonce;
  }
  return { url: client.buildAuthorizationUrl(config, params).href, codeVerifier, nonce };
}

function toTokenSet(
  res: client.TokenEndpointResponse & client.TokenEndpointResponseHelpers,
  separator: string,
): TokenSet {
  const scope = typeof res.scope === "string" ? res.scope : null;
  return {
    accessToken: res.access_token,
    refreshToken: typeof res.refresh_token === "string" && res.refresh_token ? res.refresh_token : null,
    tokenType: typeof res.token_type === "string" ? res.token_type : "bearer",
    expiresIn: typeof res.expires_in === "number" ? res.expires_in : null,
    scopes:
      scope === null
        ? null
        : scope
            .split(separator === " " ? /\s+/ : separator)
            .map((s) => s.trim())
            .filter(Boolean),
    idTokenClaims: (res.claims() as Record<string, unknown> | undefined) ?? null,
  };
}

/** Classifies any failure of a call to the provider; never lets a provider's answer become a 500. */
export function classifyProviderError(err: unknown): ProviderCallError {
  if (err instanceof ProviderCallError) return err;
  const cause: ErrorOptions = { cause: err };
  if (err instanceof client.ResponseBodyError) {
    const desc = err.error_description ? `: ${err.error_description}` : "";
    if (err.error === "invalid_grant")
      return new ProviderCallError(
        "invalid_grant",
        `the provider refused the grant (invalid_grant${desc})`,
        err.error,
        cause,
      );
    if (err.status >= 500 || err.status === 429 || err.error === "temporarily_unavailable")
      return new ProviderCallError("transient", `the provider failed (${err.status} ${err.error})`, err.error, cause);
    return new ProviderCallError(
      "rejected",
      `the provider rejected the request (${err.error}${desc})`,
      err.error,
      cause,
    );
  }
  if (err instanceof client.WWWAuthenticateChallengeError) {
    // A 401 with a challenge: the client's credentials were refused (RFC 6749 §5.2 invalid_client).
    const error =
      err.cause.map((c) => c.parameters.error).find(Boolean) ??
      (err.status === 401 ? "invalid_client" : `HTTP ${err.status}`);
    if (err.status >= 500 || err.status === 429)
      return new ProviderCallError("transient", `the provider failed (${err.status} ${error})`, error, cause);
    return new ProviderCallError("rejected", `the provider rejected the client (${error})`, error, cause);
  }
  if (err instanceof client.AuthorizationResponseError)
    return new ProviderCallError("rejected", `the provider returned an error (${err.error})`, err.error, cause);
  const e = err as Error & { code?: string; cause?: unknown };
  if (e?.name === "TimeoutError" || e?.name === "AbortError" || e instanceof TypeError)
    return new ProviderCallError("transient", `cannot reach the provider (${e.message})`, null, cause);
  if (e?.code === "OAUTH_RESPONSE_IS_NOT_CONFORM" || e?.code === "OAUTH_RESPONSE_IS_NOT_JSON") {
    const status = (e.cause as Response | undefined)?.status;
    if (typeof status === "number" && (status >= 500 || status === 429))
      return new ProviderCallError("transient", `the provider failed (HTTP ${status})`, null, cause);
  }
  return new ProviderCallError(
    "rejected",
    `the provider's answer was not usable (${e?.message ?? String(err)})`,
    null,
    cause,
  );
}

/**
 * Exchanges an authorization code. `callbackParams` are the query parameters the provider sent to
 * the redirect URI; openid-client checks `state` (and `iss` when the provider sends it) against them.
 */
export async function exchangeCode(
  provider: ProviderWithSecret,
  config: client.Configuration,
  options: {
    redirectUri: string;
    callbackParams: URLSearchParams;
    state: string;
    codeVerifier: string | null;
    nonce: string | null;
  },
): Promise<TokenSet> {
  const current = new URL(options.redirectUri);
  for (const [k, v] of options.callbackParams) {
    // An `iss` from a provider whose issuer we do not know cannot be checked; leave it out.
    if (k === "iss" && !provider.row.issuer) continue;
    current.searchParams.append(k, v);
  }
  try {
    const res = await client.authorizationCodeGrant(config, current, {
      expectedState: options.state,
      pkceCodeVerifier: options.codeVerifier ?? undefined,
      expectedNonce: options.nonce ?? undefined,
    });
    return toTokenSet(res, provider.row.scope_separator);
  } catch (err) {
    throw classifyProviderError(err);
  }
}

export async function refreshGrant(
  provider: ProviderWithSecret,
  config: client.Configuration,
  refreshToken: string,
): Promise<TokenSet> {
  try {
    return toTokenSet(await client.refreshTokenGrant(config, refreshToken), provider.row.scope_separator);
  } catch (err) {
    throw classifyProviderError(err);
  }
}

/** RFC 7009 revocation; a provider without a revocation endpoint has nothing to call. */
export async function revokeAtProvider(
  provider: ProviderWithSecret,
  config: client.Configuration,
  token: string,
  hint: "access_token" | "refresh_token",
): Promise<boolean> {
  if (!provider.row.revocation_url) return false;
  try {
    await client.tokenRevocation(config, token, { token_type_hint: hint });
    return true;
  } catch (err) {
    throw classifyProviderError(err);
  }
}

export interface AccountIdentity {
  subject: string | null;
  label: string | null;
}

const LABEL_CLAIMS = ["email", "preferred_username", "login", "username", "name", "sub", "id"];
const SUBJECT_CLAIMS = ["sub", "id", "user_id", "login", "email"];

function firstString(claims: Record<string, unknown>, names: string[]): string | null {
  for (const n of names) {
    const v = claims[n];
    if (typeof v === "string" && v) return v;
    if (typeof v === "number") return String(v);
  }
  return null;
}

/**
 * Who the connected account is at the provider, from the id_token or the userinfo endpoint. The
 * label tells several accounts of one provider apart; failing to read it never fails the flow.
 */
export async function accountIdentity(
  provider: ProviderWithSecret,
  tokens: TokenSet,
  timeoutSeconds: number,
): Promise<AccountIdentity> {
  const { row } = provider;
  let claims: Record<string, unknown> | null = null;
  if (row.account_label_source === "id_token") claims = tokens.idTokenClaims;
  else if (row.account_label_source === "userinfo" && row.userinfo_url) {
    try {
      const res = await fetch(row.userinfo_url, {
        headers: { authorization: `Bearer ${tokens.accessToken}`, accept: "application/json" },
        signal: AbortSignal.timeout(timeoutSeconds * 1000),
      });
      if (res.ok) claims = (await res.json()) as Record<string, unknown>;
      else await res.arrayBuffer();
    } catch {
      claims = null;
    }
  }
  if (!claims || typeof claims !== "object") return { subject: null, label: null };
  const label = row.account_label_claim
    ? firstString(claims, [row.account_label_claim])
    : firstString(claims, LABEL_CLAIMS);
  return { subject: firstString(claims, SUBJECT_CLAIMS), label: label ? label.slice(0, 200) : null };
}
