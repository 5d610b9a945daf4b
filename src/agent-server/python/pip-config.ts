/**
 * What a project's `pip_config_file` tells an installer: its package indexes. pip reads the file
 * itself (`PIP_CONFIG_FILE`); uv does not read pip's configuration, so the same indexes are given
 * to it as flags, and the deployment's egress allows their hosts the way it allows the npm registry.
 */

export interface PipIndexes {
  indexUrl: string | null;
  extraIndexUrls: string[];
  findLinks: string[];
  trustedHosts: string[];
}

/** pip's option names as configuration keys: `index-url` and `index_url` are the same key. */
const norm = (k: string) => k.trim().toLowerCase().replace(/_/g, "-");

/**
 * The index settings of a pip configuration (INI) text (pure): `[global]` then `[install]`, the
 * later section winning as in pip; multi-valued options split on whitespace and continuation lines.
 */
export function pipConfigIndexes(text: string): PipIndexes {
  const sections = new Map<string, Map<string, string>>();
  let current: Map<string, string> | null = null;
  let lastKey: string | null = null;
  for (const raw of text.split(/\r?\n/)) {
    if (/^\s*([#;]|$)/.test(raw)) continue;
    const header = /^\s*\[([^\]]+)\]\s*$/.exec(raw);
    if (header) {
      const name = header[1].trim().toLowerCase();
      current = sections.get(name) ?? new Map();
      sections.set(name, current);
      lastKey = null;
      continue;
    }
    if (!current) continue;
    // An indented line continues the previous value (configparser's rule, which pip uses).
    if (/^\s/.test(raw) && lastKey) {
      current.set(lastKey, `${current.get(lastKey) ?? ""}\n${raw.trim()}`);
      continue;
    }
    const m = /^([^=:]+)[=:](.*)$/.exec(raw);
    if (!m) continue;
    lastKey = norm(m[1]);
    current.set(lastKey, m[2].trim());
  }
  const get = (k: string) => sections.get("install")?.get(k) ?? sections.get("global")?.get(k) ?? null;
  const list = (k: string) => (get(k) ?? "").split(/\s+/).filter(Boolean);
  return { indexUrl: list("index-url")[0] ?? null, extraIndexUrls: list("extra-index-url"), findLinks: list("find-links"), trustedHosts: list("trusted-host") };
}

/** The same indexes as uv flags (pure). */
export function uvIndexArgs(ix: PipIndexes): string[] {
  return [
    ...(ix.indexUrl ? ["--index-url", ix.indexUrl] : []),
    ...ix.extraIndexUrls.flatMap((u) => ["--extra-index-url", u]),
    ...ix.findLinks.flatMap((u) => ["--find-links", u]),
    ...ix.trustedHosts.flatMap((h) => ["--allow-insecure-host", h]),
  ];
}

/** Every URL a build of the project fetches from beyond PyPI: the pip configuration's indexes (pure). */
export function pipConfigUrls(ix: PipIndexes): string[] {
  return [...(ix.indexUrl ? [ix.indexUrl] : []), ...ix.extraIndexUrls, ...ix.findLinks];
}

/**
 * The URL of a `git+https://…` dependency (plain or PEP 508 `name @ git+https://…`), for the
 * egress allow-list; null for any other dependency (pure).
 */
export function gitDependencyUrl(dep: string): string | null {
  const m = /git\+(https?:\/\/\S+)/.exec(dep);
  return m ? m[1] : null;
}

/** Every http(s) URL a `uv.lock` names (its registries, git sources and file URLs), pure. */
export function uvLockUrls(lock: string): string[] {
  return [...new Set([...lock.matchAll(/"(?:git\+)?(https?:\/\/[^"\s]+)"/g)].map((m) => m[1]))];
}
