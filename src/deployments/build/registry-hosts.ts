/**
 * The package registries a build's npm will fetch from, as egress allow-list entries: a build step
 * must reach them even when the deployment's `proxy_config` allows only what its agent calls.
 * Decided from what npm itself reads for a project (its `.npmrc`'s `registry` and
 * `@scope:registry` lines, `npm_config_registry` in the build's environment, else npm's default),
 * never by running anything of the project.
 */

export const NPM_DEFAULT_REGISTRY = "https://registry.npmjs.org/";

/** `${VAR}` in an .npmrc value, expanded from the build's environment as npm does (unset → empty). */
function expand(value: string, env: Record<string, string>): string {
  return value.replace(/\$\{([^}]+)\}/g, (_m, name: string) => env[name] ?? "");
}

/** What an .npmrc text sets: the default `registry` (last one wins, as in npm) and `@scope:registry` URLs. */
export function npmrcRegistries(npmrc: string, env: Record<string, string> = {}): { registry: string | null; scoped: string[] } {
  let registry: string | null = null;
  const scoped: string[] = [];
  for (const raw of npmrc.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith(";") || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq < 0) continue;
    const key = line.slice(0, eq).trim();
    let value = line.slice(eq + 1).trim();
    if ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'"))) value = value.slice(1, -1);
    if (key === "registry") registry = expand(value, env);
    else if (/^@[^:\s]+:registry$/.test(key)) scoped.push(expand(value, env));
  }
  return { registry, scoped };
}

/**
 * An allow-list entry for a registry URL: the bare host on the scheme's default port (80/443, which
 * the proxy intercepts), `host:PORT` otherwise; null for what is not an http(s) URL.
 */
export function registryEntry(url: string): string | null {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    return null;
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") return null;
  const host = u.hostname;
  if (!host) return null;
  if (!u.port) return host.startsWith("[") ? host.slice(1, -1) : host;
  return `${host}:${u.port}`;
}

/**
 * Every registry entry a build of this project needs: the default registry (the environment's
 * `npm_config_registry` over the .npmrc's, as npm ranks them; else npm's own default) and every
 * scope's registry.
 */
export function registryHosts(input: { npmrc: string | null; env: Record<string, string> }): string[] {
  const rc = input.npmrc ? npmrcRegistries(input.npmrc, input.env) : { registry: null, scoped: [] };
  const fromEnv = input.env.npm_config_registry || input.env.NPM_CONFIG_REGISTRY || null;
  const urls = [fromEnv ?? rc.registry ?? NPM_DEFAULT_REGISTRY, ...rc.scoped];
  return [...new Set(urls.map(registryEntry).filter((e): e is string => e !== null))];
}

/** PyPI's index and the host its files are served from. */
export const PYPI_HOSTS = ["pypi.org", "files.pythonhosted.org"];

/**
 * What a Python build step needs reachable: PyPI, and the indexes the build's environment names
 * (`PIP_INDEX_URL`, `PIP_EXTRA_INDEX_URL` (space separated), `UV_INDEX_URL`, `UV_EXTRA_INDEX_URL`),
 * as pip and uv read them.
 */
export function pythonRegistryHosts(env: Record<string, string>): string[] {
  const urls = ["PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL"].flatMap((k) => (env[k] ?? "").split(/\s+/).filter(Boolean));
  return [...new Set([...PYPI_HOSTS, ...urls.map(registryEntry).filter((e): e is string => e !== null)])];
}
