import { PatternError } from "./host-glob.ts";

/**
 * `match_paths` entries: an exact path, or a prefix ending in `*` (`/v1/*`, `/repos*`). Requests are
 * matched on a normalised path (unreserved percent-escapes decoded, dot segments resolved, query
 * dropped), and that same normalised path is what the proxy sends upstream, so the rule sees the
 * path the server will interpret. Paths with encoded slashes or backslashes never match a
 * path-restricted rule: servers disagree on them, and not injecting is the safe side.
 */
export interface PathPattern {
  source: string;
  prefix: boolean;
  text: string;
}

const MAX_PATH_PATTERN = 1024;

export function compilePathPattern(source: string): PathPattern {
  if (typeof source !== "string" || source.length === 0) throw new PatternError("path pattern must not be empty");
  if (source.length > MAX_PATH_PATTERN)
    throw new PatternError(`path pattern is longer than ${MAX_PATH_PATTERN} characters`);
  if (!source.startsWith("/")) throw new PatternError(`path pattern must start with "/": ${JSON.stringify(source)}`);
  if (/[\s\p{Cc}?#\\]/u.test(source))
    throw new PatternError(
      `path pattern must not contain spaces, control characters, "?", "#" or "\\": ${JSON.stringify(source)}`,
    );
  const star = source.indexOf("*");
  if (star >= 0 && star !== source.length - 1)
    throw new PatternError(`"*" is only allowed at the end of a path pattern: ${JSON.stringify(source)}`);
  const prefix = star >= 0;
  const body = prefix ? source.slice(0, -1) : source;
  const normalised = normalisePath(body);
  if (normalised === null || normalised !== body.replace(/%[0-9a-f]{2}/gi, (m) => m.toUpperCase())) {
    throw new PatternError(
      `path pattern must be in normal form (no "." or ".." segments, no escaped unreserved characters): ${JSON.stringify(source)}`,
    );
  }
  return { source, prefix, text: normalised };
}

const UNRESERVED = /[A-Za-z0-9\-._~]/;

/**
 * Normalises the path of a request target (origin-form, query excluded): decodes escapes of
 * unreserved characters, upper-cases the others, resolves `.`/`..` segments (RFC 3986 §5.2.4).
 * Returns null for paths that are not origin-form.
 */
export function normalisePath(path: string): string | null {
  if (!path.startsWith("/")) return null;
  let decoded = path;
  if (path.includes("%")) {
    let bad = false;
    decoded = path.replace(/%([0-9A-Fa-f]{2})|%/g, (m, hex: string | undefined) => {
      if (!hex) {
        bad = true;
        return m;
      }
      const ch = String.fromCharCode(parseInt(hex, 16));
      return UNRESERVED.test(ch) ? ch : `%${hex.toUpperCase()}`;
    });
    if (bad) return null;
  }
  if (!decoded.includes(".")) return decoded;
  const segments = decoded.split("/");
  const out: string[] = [];
  for (let i = 1; i < segments.length; i++) {
    const s = segments[i];
    const last = i === segments.length - 1;
    if (s === ".") {
      if (last) out.push("");
    } else if (s === "..") {
      out.pop();
      if (last) out.push("");
    } else out.push(s);
  }
  return "/" + out.join("/");
}

/** Is the normalised path ambiguous between servers (encoded slash or backslash)? */
export function pathIsAmbiguous(normalised: string): boolean {
  return /%2F|%5C|\\/i.test(normalised);
}

export function pathMatches(patterns: readonly PathPattern[], normalised: string): boolean {
  if (patterns.length === 0) return true;
  if (pathIsAmbiguous(normalised)) return false;
  for (const p of patterns) {
    if (p.prefix ? normalised.startsWith(p.text) : normalised === p.text) return true;
  }
  return false;
}
