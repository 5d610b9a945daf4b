/**
 * Sources are cloned over the network only: a path, `file://` or git's other transports
 * (`ext::`, `ssh://`, `git://`) would let a tenant read the platform's own disk or run commands,
 * and only HTTP(S) goes through the egress address policy's proxy.
 */
export const REPO_URL_RULE =
  "repo_url must be an https:// (or http://) URL of a git repository: local paths, file:// and other git transports are not accepted";

/** Why `url` may not be cloned, or null (pure). */
export function repoUrlProblem(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return REPO_URL_RULE;
  }
  if ((u.protocol !== "https:" && u.protocol !== "http:") || !u.hostname || url !== url.trim()) return REPO_URL_RULE;
  return null;
}
