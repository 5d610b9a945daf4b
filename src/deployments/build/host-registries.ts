import { execFile } from "node:child_process";

/**
 * The package registries the host's own package managers use, as the platform's user sees them:
 * npm's `registry` and `cafile` (what `npm config get` reports: `/etc/npmrc`, `~/.npmrc`,
 * `NPM_CONFIG_*`) and pip's `index-url`, `extra-index-url` and `cert` (what `pip config list`
 * reports: pip.conf files and `PIP_*`). A company that points its hosts at a mirror has said so
 * there already; builds follow it instead of a second Wharf setting.
 */
export interface HostRegistries {
  npm: { registry: string | null; cafile: string | null };
  pip: { indexUrl: string | null; extraIndexUrls: string[]; cert: string | null };
}

export const NO_HOST_REGISTRIES: HostRegistries = {
  npm: { registry: null, cafile: null },
  pip: { indexUrl: null, extraIndexUrls: [], cert: null },
};

const unset = (v: string | undefined) => (v === undefined || v === "" || v === "null" || v === "undefined" ? null : v);

/** `npm config get registry cafile` prints `registry=…` and `cafile=…` lines (`null` when unset). */
export function parseNpmConfigGet(stdout: string): HostRegistries["npm"] {
  const values = new Map<string, string>();
  for (const line of stdout.split(/\r?\n/)) {
    const eq = line.indexOf("=");
    if (eq > 0) values.set(line.slice(0, eq).trim(), line.slice(eq + 1).trim());
  }
  return { registry: unset(values.get("registry")), cafile: unset(values.get("cafile")) };
}

/**
 * `pip config list` prints `section.key='value'` lines, the environment's as `:env:.key`. pip ranks
 * the environment over `[install]` over `[global]`; `extra-index-url` is a whitespace list.
 */
export function parsePipConfigList(stdout: string): HostRegistries["pip"] {
  const values = new Map<string, string>();
  for (const line of stdout.split(/\r?\n/)) {
    const m = /^([^.=\s]*)\.([a-z-]+)=(.*)$/.exec(line.trim());
    if (!m) continue;
    let v = m[3];
    if ((v.startsWith("'") && v.endsWith("'")) || (v.startsWith('"') && v.endsWith('"'))) v = v.slice(1, -1);
    values.set(`${m[1]}.${m[2]}`, v);
  }
  const get = (key: string) =>
    unset(values.get(`:env:.${key}`) ?? values.get(`install.${key}`) ?? values.get(`global.${key}`));
  return {
    indexUrl: get("index-url"),
    extraIndexUrls: (get("extra-index-url") ?? "").split(/\s+/).filter(Boolean),
    cert: get("cert"),
  };
}

function run(command: string, args: string[], env: NodeJS.ProcessEnv | undefined): Promise<string | null> {
  return new Promise((resolve) => {
    // No host package manager (or a broken one): builds keep their defaults.
    execFile(command, args, { env, cwd: "/", timeout: 15_000, encoding: "utf8" }, (err, stdout) =>
      resolve(err ? null : stdout),
    );
  });
}

/**
 * Asks the host's npm and pip (as the platform's user, with its environment unless `env` is
 * given). A tool that is missing or fails counts as unconfigured.
 */
export async function readHostRegistries(env?: NodeJS.ProcessEnv): Promise<HostRegistries> {
  const [npm, pip] = await Promise.all([
    run("npm", ["config", "get", "registry", "cafile"], env),
    run("python3", ["-m", "pip", "config", "list"], env),
  ]);
  return {
    npm: npm === null ? NO_HOST_REGISTRIES.npm : parseNpmConfigGet(npm),
    pip: pip === null ? NO_HOST_REGISTRIES.pip : parsePipConfigList(pip),
  };
}
