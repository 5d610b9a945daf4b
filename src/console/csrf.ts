import crypto from "node:crypto";

/** Header the console sends on every call it makes with the session cookie. */
export const CSRF_HEADER = "x-wharf-csrf";

const SAFE_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

/**
 * The CSRF token of a session: a hash of the cookie value, so the server keeps no extra state and
 * the token (readable by the page) cannot be turned back into the cookie (which scripts never see).
 */
export function csrfTokenFor(sessionValue: string): string {
  return crypto.createHash("sha256").update(`wharf-console-csrf:${sessionValue}`).digest("base64url");
}

function sameText(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && crypto.timingSafeEqual(x, y);
}

/** The host the browser addressed: the proxy's `X-Forwarded-Host` when one forwarded the request. */
function requestHost(headers: Headers): string | null {
  return headers.get("x-forwarded-host")?.split(",")[0].trim() || headers.get("host");
}

function originHost(origin: string): string | null {
  try {
    return new URL(origin).host;
  } catch {
    return null;
  }
}

/**
 * Whether a request that authenticates with the session cookie may act. The cookie is
 * SameSite=Strict already; on top of that (older browsers, same-site sibling origins):
 * - an `Origin` header, when present, must name this host;
 * - a WebSocket upgrade (browsers cannot add headers to one) must carry a matching `Origin`;
 * - any other request that is not GET/HEAD/OPTIONS, and any request whose method the caller did
 *   not say, must carry the session's CSRF token in `X-Wharf-Csrf` (a header a cross-site page
 *   cannot set without a CORS preflight, which Wharf never grants).
 * Returns null when allowed, else the reason.
 */
export function cookieRequestRefusal(input: {
  method: string | undefined;
  headers: Headers;
  sessionValue: string;
}): string | null {
  const { headers } = input;
  const origin = headers.get("origin");
  const host = requestHost(headers);
  if (origin !== null && (origin === "null" || !host || originHost(origin) !== host))
    return "cross-origin request refused for a console session";
  const isUpgrade = headers.get("upgrade")?.toLowerCase() === "websocket";
  if (isUpgrade) return origin === null ? "a WebSocket with a console session must send Origin" : null;
  const method = input.method?.toUpperCase();
  if (method && SAFE_METHODS.has(method)) return null;
  const token = headers.get(CSRF_HEADER);
  if (!token || !sameText(token, csrfTokenFor(input.sessionValue)))
    return `missing or wrong ${CSRF_HEADER} header for a console session`;
  return null;
}
