/**
 * Which destinations get the service account's bearer token, which token-endpoint requests from
 * the sandbox the proxy answers itself, and which requests must be left alone.
 */
export const GOOGLE_API_SUFFIX = "googleapis.com";

/** `*.googleapis.com` (strict subdomains; `*.mtls.googleapis.com` needs client certificates the proxy cannot present). */
export function isGoogleApiHost(host: string, universeDomain = GOOGLE_API_SUFFIX): boolean {
  const h = host.toLowerCase();
  const suffix = universeDomain.toLowerCase();
  if (!(h.length > suffix.length + 1 && h.endsWith(`.${suffix}`))) return false;
  return !h.endsWith(`.mtls.${suffix}`);
}

/**
 * OAuth token endpoints the sandbox's client libraries call with the compatibility key (JWT-bearer
 * grant). They are answered by the proxy with a dummy token and never forwarded: the real token is
 * added on the way to the API host instead.
 */
export function isGoogleTokenEndpoint(host: string, method: string, path: string): boolean {
  if (method.toUpperCase() !== "POST") return false;
  const h = host.toLowerCase();
  return (
    (h === "oauth2.googleapis.com" && path === "/token") ||
    (h === "www.googleapis.com" && (path === "/oauth2/v4/token" || path === "/oauth2/v3/token")) ||
    (h === "accounts.google.com" && path === "/o/oauth2/token")
  );
}

/** Names the sandbox may use for the GCE metadata server; the proxy serves them itself, never forwards. */
export function isGoogleMetadataHost(host: string): boolean {
  const h = host.toLowerCase();
  return h === "metadata.google.internal" || h === "metadata" || h === "169.254.169.254";
}

/**
 * A signed URL (V4 `X-Goog-Signature`, V2 `GoogleAccessId` + `Signature`) carries its own
 * authorisation; adding a bearer token would make Cloud Storage reject it.
 */
export function isGoogleSignedUrl(target: string): boolean {
  const q = target.indexOf("?");
  if (q === -1) return false;
  const keys = new Set(
    target
      .slice(q + 1)
      .split("&")
      .map((p) => decodeSafe(p.split("=")[0]).toLowerCase()),
  );
  return (
    keys.has("x-goog-signature") ||
    keys.has("x-goog-credential") ||
    (keys.has("googleaccessid") && keys.has("signature"))
  );
}

function decodeSafe(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}
