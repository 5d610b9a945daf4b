/**
 * Validation of the headers a credential callback returns, before any is injected: a callback is
 * user code on the network, and a header that could split a request (CR/LF), change its framing
 * or routing (hop-by-hop, Host, Content-Length) or bloat it must fail the resolution closed.
 */
export const MAX_CALLBACK_HEADERS = 64;
export const MAX_CALLBACK_HEADER_VALUE_BYTES = 8 * 1024;
export const MAX_CALLBACK_HEADERS_TOTAL_BYTES = 32 * 1024;

const TOKEN = /^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,256}$/;
// Visible ASCII, space, tab and obs-text; no CR, LF, NUL or other controls.
const FIELD_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;

/** Hop-by-hop and framing/routing headers a callback may never set. */
const FORBIDDEN = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
  "expect",
]);

/** Returns the problem with the `headers` member, or null when every entry may be injected. */
export function callbackHeadersProblem(headers: unknown): string | null {
  if (typeof headers !== "object" || headers === null || Array.isArray(headers)) return "headers must be a JSON object";
  const entries = Object.entries(headers as Record<string, unknown>);
  if (entries.length > MAX_CALLBACK_HEADERS) return `more than ${MAX_CALLBACK_HEADERS} headers`;
  let total = 0;
  const seen = new Set<string>();
  for (const [name, value] of entries) {
    if (!TOKEN.test(name)) return "a header name is not a valid HTTP token";
    const lower = name.toLowerCase();
    if (FORBIDDEN.has(lower)) return `header ${lower} may not be injected`;
    if (seen.has(lower)) return `header ${lower} is given twice`;
    seen.add(lower);
    if (typeof value !== "string") return `header ${lower} must map to a string`;
    if (!FIELD_VALUE.test(value)) return `header ${lower} has a control character (CR, LF, NUL …) in its value`;
    const bytes = Buffer.byteLength(value, "latin1");
    if (bytes > MAX_CALLBACK_HEADER_VALUE_BYTES)
      return `header ${lower} is longer than ${MAX_CALLBACK_HEADER_VALUE_BYTES} bytes`;
    total += bytes + name.length;
    if (total > MAX_CALLBACK_HEADERS_TOTAL_BYTES)
      return `headers are longer than ${MAX_CALLBACK_HEADERS_TOTAL_BYTES} bytes in total`;
  }
  return null;
}
