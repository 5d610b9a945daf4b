import { canonicalHost, type CanonicalHost } from "./canonical-host.ts";

/**
 * Host globs for `match_hosts`, callbacks and `no_proxy`: an exact name, an IP literal, or a name
 * with wildcards. A leading `*.` label stands for one or more labels (RFC 1034 style, so
 * `*.example.com` matches `a.b.example.com` but not `example.com`); a `*` inside any other label
 * matches characters within that label only. The last two labels must be literal (no `*.com`), and
 * a wildcard never matches an IP literal.
 */
export interface HostGlob {
  source: string;
  matches(host: CanonicalHost): boolean;
}

export class PatternError extends Error {}

const GLOB_LABEL = /^(?!-)[a-z0-9_*-]{1,63}$/;

function escapeRe(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

/** Compiles one glob; throws PatternError with a message fit for a 422. */
export function compileHostGlob(pattern: string): HostGlob {
  if (typeof pattern !== "string" || pattern.length === 0) throw new PatternError("host pattern must not be empty");
  if (pattern.length > 253) throw new PatternError("host pattern is longer than 253 characters");
  if (!pattern.includes("*")) {
    const exact = canonicalHost(pattern);
    if (!exact) throw new PatternError(`not a valid host name or IP address: ${JSON.stringify(pattern)}`);
    return { source: pattern, matches: (h) => h.kind === exact.kind && h.host === exact.host };
  }
  let text = pattern.toLowerCase();
  if (text.endsWith(".")) text = text.slice(0, -1);
  const labels = text.split(".");
  if (labels.length < 3 && labels[0] === "*")
    throw new PatternError(
      `wildcard needs at least two literal labels after it (like *.example.com): ${JSON.stringify(pattern)}`,
    );
  if (!labels.every((l) => GLOB_LABEL.test(l)))
    throw new PatternError(`not a valid host pattern: ${JSON.stringify(pattern)}`);
  if (labels.slice(1).some((l) => l === "*"))
    throw new PatternError(`a whole-label * is only allowed as the first label: ${JSON.stringify(pattern)}`);
  if (labels.slice(-2).some((l) => l.includes("*")))
    throw new PatternError(`the last two labels of a host pattern must be literal: ${JSON.stringify(pattern)}`);
  if (labels.some((l) => /\*\*/.test(l)))
    throw new PatternError(`repeated * in a host pattern: ${JSON.stringify(pattern)}`);
  const literalTail = labels.filter((l) => !l.includes("*")).join(".");
  if (literalTail && !canonicalHost(literalTail))
    throw new PatternError(`not a valid host pattern: ${JSON.stringify(pattern)}`);
  // Built from a closed alphabet ([a-z0-9_-] and '*'), so the regex is linear and cannot be hostile.
  const parts = labels.map((l, i) =>
    i === 0 && l === "*" ? "(?:[a-z0-9_-]+\\.)*[a-z0-9_-]+" : l.split("*").map(escapeRe).join("[a-z0-9_-]*"),
  );
  const re = new RegExp(`^${parts.join("\\.")}$`);
  return { source: pattern, matches: (h) => h.kind === "name" && re.test(h.host) };
}

/** True when any glob of the list matches. */
export function anyGlobMatches(globs: readonly HostGlob[], host: CanonicalHost): boolean {
  for (const g of globs) if (g.matches(host)) return true;
  return false;
}
