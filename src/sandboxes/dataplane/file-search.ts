import { posix } from "node:path";

/**
 * Pure parts of the data plane's `POST /glob` and `POST /grep` (LangSmith Deployment's read-only
 * file search): pattern matching, how deep `find` must go, and parsing what `find -printf` and
 * `grep -Z` print inside the sandbox. The listing itself always runs inside the sandbox as its user.
 */

/** `**` any number of segments, `*` `?` `[...]` within one segment; anchored on the whole relative path. */
export function globToRegExp(pattern: string): RegExp {
  // `**/**/` is `**/`: repeated any-depth groups only add backtracking.
  pattern = pattern.replace(/(\*\*\/)+/g, "**/");
  let re = "";
  let i = 0;
  while (i < pattern.length) {
    const c = pattern[i];
    if (c === "*" && pattern[i + 1] === "*") {
      const atStart = i === 0 || pattern[i - 1] === "/";
      const next = pattern[i + 2];
      if (atStart && next === "/") {
        re += "(?:[^/]*/)*";
        i += 3;
        continue;
      }
      re += ".*";
      i += 2;
      continue;
    }
    if (c === "*") re += "[^/]*";
    else if (c === "?") re += "[^/]";
    else if (c === "[") {
      const end = pattern.indexOf("]", i + 2);
      if (end < 0) re += "\\[";
      else {
        let cls = pattern.slice(i + 1, end).replace(/\\/g, "\\\\");
        if (cls.startsWith("!")) cls = `^${cls.slice(1)}`;
        re += `[${cls}]`;
        i = end + 1;
        continue;
      }
    } else re += c.replace(/[.+^${}()|\\]/g, "\\$&");
    i++;
  }
  return new RegExp(`^${re}$`);
}

/** How deep `find` must descend for a pattern: its segment count, or unlimited with `**`. */
export function globDepth(pattern: string): number | null {
  if (pattern.includes("**")) return null;
  return pattern.split("/").filter(Boolean).length;
}

/**
 * grep's file filter: a bare pattern (`*.py`) matches the basename at any depth; one with `/` or
 * `**` matches the path relative to the search root.
 */
export function grepFileFilter(glob: string | undefined): ((relative: string) => boolean) | null {
  if (!glob) return null;
  const re = globToRegExp(glob);
  if (glob.includes("/") || glob.includes("**")) return (rel) => re.test(rel);
  return (rel) => re.test(posix.basename(rel));
}

/** A search root as the sandbox sees it: relative paths start at the user's home. */
export function searchRoot(path: string, home: string): string {
  return posix.resolve(home, path);
}

export interface FoundEntry {
  path: string;
  is_dir: boolean;
  size_bytes: number;
  modified_at: string;
}

/** One `find -printf '%y\t%s\t%T@\t%P\0'` record → an entry, relative path kept for matching. */
export function parseFindRecord(record: string, root: string): (FoundEntry & { relative: string }) | null {
  const parts = record.split("\t");
  if (parts.length < 4) return null;
  const [type, size, mtime] = parts;
  const relative = parts.slice(3).join("\t");
  if (!relative) return null;
  const seconds = Number(mtime);
  return {
    relative,
    path: posix.join(root, relative),
    is_dir: type === "d",
    size_bytes: Number(size) || 0,
    modified_at: new Date(Number.isFinite(seconds) ? seconds * 1000 : 0).toISOString(),
  };
}

export interface GrepMatch {
  path: string;
  line: number;
  text: string;
}

/** Longest matching line returned (a minified file is one huge line). */
export const MAX_LINE_CHARS = 2000;

/** One `grep -nHZ` output line (`file\0N:text`) → a match. */
export function parseGrepLine(line: string): GrepMatch | null {
  const nul = line.indexOf("\0");
  if (nul < 0) return null;
  const rest = line.slice(nul + 1);
  const colon = rest.indexOf(":");
  if (colon < 0) return null;
  const n = Number(rest.slice(0, colon));
  if (!Number.isInteger(n)) return null;
  return { path: line.slice(0, nul), line: n, text: rest.slice(colon + 1, colon + 1 + MAX_LINE_CHARS) };
}
