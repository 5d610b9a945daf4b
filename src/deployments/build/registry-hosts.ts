import { gitDependencyUrl, pipConfigIndexes, pipConfigUrls, uvLockUrls } from "../../agent-server/index.ts";

/**
 * The package registries a build's npm will fetch from, as egress allow-list entries: a build step
 * must reach them even when the deployment's `proxy_config` allows only what its agent calls.
 * Decided from what npm itself reads for a project (its `.npmrc`'s `registry` and
 * `@scope:registry` lines, `npm_config_registry` in the build's environment, else npm's default),
 * never by running anything of the project.
 */

import type { HostRegistries } from "./host-registries.ts";

export const NPM_DEFAULT_REGISTRY = "https://registry.npmjs.org/";

/** `${VAR}` in an .npmrc value, expanded from the build's environment as npm does (unset → empty). */
function expand(value: string, env: Record<string, string>): string {
  return value.replace(/\$\{([^}]+)\}/g, (_m, name: string) => env[name] ?? "");
}

/** What an .npmrc text sets: the default `registry` (last one wins, as in npm) and `@scope:registry` URLs. */
export function npmrcRegistries(
  npmrc: string,
  env: Record<string, string> = {},
): { registry: string | null; scoped: string[] } {
  let registry: string | null = null;
  const scoped: string[] = [];
  for (const raw of npmrc.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith(";") || line.startsWith("#")) continue;
    const eq = line.indexOf("=");
    if (eq < 0) continue;
    const key = line.slice(0, eq).trim();
    let value = line.slice(eq + 1).trim();
    if ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'")))
      value = value.slice(1, -1);
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
  const urls = ["PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "UV_INDEX_URL", "UV_EXTRA_INDEX_URL"].flatMap((k) =>
    (env[k] ?? "").split(/\s+/).filter(Boolean),
  );
  return [...new Set([...PYPI_HOSTS, ...urls.map(registryEntry).filter((e): e is string => e !== null)])];
}

/**
 * What a Python build of this project fetches from beyond PyPI, as allow-list entries (pure): the
 * indexes of its `pip_config_file`, the hosts of its `git+https` dependencies and every source its
 * `uv.lock` names, as the npm registries of its `.npmrc` are.
 */
export function pythonProjectHosts(input: {
  pipConfig: string | null;
  dependencies: string[];
  uvLock: string | null;
}): string[] {
  const urls = [
    ...(input.pipConfig ? pipConfigUrls(pipConfigIndexes(input.pipConfig)) : []),
    ...input.dependencies.map(gitDependencyUrl).filter((u): u is string => u !== null),
    ...(input.uvLock ? uvLockUrls(input.uvLock) : []),
  ];
  return [...new Set(urls.map(registryEntry).filter((e): e is string => e !== null))];
}

/** What a build step gets from the host's package-manager configuration and the operator's setting. */
export interface BuildRegistryPlan {
  /** Added to the step's environment so its npm and pip use the host's registries. */
  env: Record<string, string>;
  /** Allow-list entries the step needs (its registries, wherever they were configured). */
  allow: string[];
  /** The host's registries the step uses (its only entries that may ever be reached at internal addresses). */
  hostEntries: string[];
  /** Entries the proxy may dial at internal addresses: `hostEntries` when the operator allows it, else none. */
  internal: string[];
  /** CA files the host's npm and pip trust (`cafile`, `cert`), trusted upstream for this step. */
  caFiles: string[];
}

const httpUrl = (u: string | null): u is string => u !== null && /^https?:\/\//i.test(u);

/**
 * A build step's registries. npm's default registry is the step environment's, else the project's
 * `.npmrc`'s, else the host's (given to the step as `npm_config_registry`), else npm's default;
 * pip's index and extra indexes likewise from the environment, else the host's. Only what came
 * from the host may be reached at an internal address, and only with the operator's setting: a
 * project's own `.npmrc` naming an internal host stays refused.
 */
export function buildRegistryPlan(input: {
  npmrc: string | null;
  env: Record<string, string>;
  host: HostRegistries;
  python: boolean;
  allowInternal: boolean;
}): BuildRegistryPlan {
  const env: Record<string, string> = {};
  const hostUrls: string[] = [];
  const rc = input.npmrc ? npmrcRegistries(input.npmrc, input.env) : { registry: null };
  const stepRegistry = input.env.npm_config_registry || input.env.NPM_CONFIG_REGISTRY || rc.registry;
  if (
    !stepRegistry &&
    httpUrl(input.host.npm.registry) &&
    registryEntry(input.host.npm.registry) !== registryEntry(NPM_DEFAULT_REGISTRY)
  ) {
    env.npm_config_registry = input.host.npm.registry;
    hostUrls.push(input.host.npm.registry);
  }
  if (input.python) {
    if (!input.env.PIP_INDEX_URL && httpUrl(input.host.pip.indexUrl)) {
      env.PIP_INDEX_URL = input.host.pip.indexUrl;
      hostUrls.push(input.host.pip.indexUrl);
    }
    const extras = input.host.pip.extraIndexUrls.filter((u) => httpUrl(u));
    if (!input.env.PIP_EXTRA_INDEX_URL && extras.length) {
      env.PIP_EXTRA_INDEX_URL = extras.join(" ");
      hostUrls.push(...extras);
    }
  }
  const stepEnv = { ...input.env, ...env };
  const npm = registryHosts({ npmrc: input.npmrc, env: stepEnv });
  const allow = input.python ? [...new Set([...npm, ...pythonRegistryHosts(stepEnv)])] : npm;
  const hostEntries = [...new Set(hostUrls.map(registryEntry).filter((e): e is string => e !== null))];
  const caFiles = [input.host.npm.cafile, input.python ? input.host.pip.cert : null].filter(
    (f): f is string => !!f && f.startsWith("/"),
  );
  return { env, allow, hostEntries, internal: input.allowInternal ? hostEntries : [], caFiles: [...new Set(caFiles)] };
}
