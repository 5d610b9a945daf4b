import fs from "node:fs";
import path from "node:path";
import { graphRuntime, PYTHON_ENV_CHILD } from "../../agent-server/index.ts";
import type { DeploymentsLayout } from "../layout.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import { TSX_LOADER } from "../runtime/agent-process.ts";
import type { BuildStep } from "./builder.ts";
import { readProjectFile, LOCKFILE_MAX } from "./project-file.ts";
import { pythonProjectHosts } from "./registry-hosts.ts";

/** A key as the Python env child prints it (hex digest): the only name trusted under the envs folder. */
const KEY = /^[0-9a-f]{16}$/;

export class PythonBuildError extends Error {}

/** Whether a langgraph.json has Python graphs or Python auth (pure over the file's text). */
export function needsPython(config: {
  graphs?: Record<string, string | { path?: string }>;
  auth?: { path?: unknown };
}): boolean {
  const refs = Object.values(config.graphs ?? {}).map((g) => (typeof g === "string" ? g : (g?.path ?? "")));
  if (typeof config.auth?.path === "string") refs.push(config.auth.path);
  return refs.some((r) => typeof r === "string" && r !== "" && graphRuntime(r) === "python");
}

export function projectNeedsPython(configFile: string): boolean {
  return needsPython(JSON.parse(fs.readFileSync(configFile, "utf8")));
}

interface Opts {
  layout: DeploymentsLayout;
  workspaceId: string;
  log: RevisionLog;
  step: BuildStep;
  env: Record<string, string>;
}

/** The last line a child step printed, as JSON; a clear error when it printed none. */
function lastJson(out: string, what: string): Record<string, unknown> {
  const last = out.trim().split("\n").pop() ?? "";
  try {
    return JSON.parse(last) as Record<string, unknown>;
  } catch (err) {
    throw new PythonBuildError(`${what} printed no result: ${last.slice(0, 500)}`, { cause: err });
  }
}

/**
 * The hosts a Python install of this project reaches beyond PyPI, from its own files read on the
 * platform's side (never followed, capped): `pip_config_file`, `git+https` dependencies, `uv.lock`.
 */
export function pythonInstallHosts(config: { dir: string; file: string }, buildRoot: string): string[] {
  const raw = JSON.parse(fs.readFileSync(config.file, "utf8")) as {
    pip_config_file?: unknown;
    dependencies?: unknown;
    source?: { kind?: unknown; root?: unknown };
  };
  const rel = (p: string) => path.relative(buildRoot, path.resolve(config.dir, p));
  const pipConfig =
    typeof raw.pip_config_file === "string" ? readProjectFile(buildRoot, rel(raw.pip_config_file)) : null;
  const dependencies = Array.isArray(raw.dependencies)
    ? raw.dependencies.filter((d): d is string => typeof d === "string")
    : [];
  const uvRoot = raw.source?.kind === "uv" ? (typeof raw.source.root === "string" ? raw.source.root : ".") : null;
  const uvLock = uvRoot !== null ? readProjectFile(buildRoot, rel(path.join(uvRoot, "uv.lock")), LOCKFILE_MAX) : null;
  return pythonProjectHosts({ pipConfig, dependencies, uvLock });
}

async function runChild(
  mode: "key" | "create" | "check",
  config: { dir: string; file: string },
  o: Opts,
  python: { envs: string; writable: boolean; hosts?: string[] },
  what: string,
  writable: boolean,
): Promise<Record<string, unknown>> {
  const out = await o.step({
    what,
    argv: [
      process.execPath,
      "--import",
      TSX_LOADER,
      PYTHON_ENV_CHILD,
      mode,
      config.file,
      o.layout.pythonEnvsFor(o.workspaceId),
    ],
    cwd: config.dir,
    env: o.env,
    writable,
    capture: true,
    python,
  });
  const r = lastJson(out, what);
  if (typeof r.error === "string") throw new PythonBuildError(r.error);
  return r;
}

/**
 * Creates the project's Python environment once per key, like `node_modules`: confined as the
 * deployment, with PyPI reachable. The environment is made in a staging folder shown at the
 * workspace's envs path (a venv only works at the path it was made at), then moved into the
 * shared folder by the platform; builds never get that folder writable, so no build changes an
 * environment another revision runs.
 */
export async function installPythonEnvironment(
  config: { dir: string; file: string },
  o: Opts & { revisionId: string },
): Promise<void> {
  const envs = o.layout.pythonEnvsFor(o.workspaceId);
  fs.mkdirSync(envs, { recursive: true, mode: 0o755 });
  let hosts: string[];
  try {
    hosts = pythonInstallHosts(config, o.layout.buildDir(o.revisionId));
  } catch (err) {
    throw new PythonBuildError((err as Error).message, { cause: err });
  }
  if (hosts.length) o.log.line(`Python package sources reachable for this build besides PyPI: ${hosts.join(", ")}`);
  const { key } = await runChild(
    "key",
    config,
    o,
    { envs, writable: false },
    "computing the Python environment's key",
    false,
  );
  if (typeof key !== "string" || !KEY.test(key))
    throw new PythonBuildError(`unexpected Python environment key ${String(key)}`);
  const target = path.join(envs, key);
  if (fs.existsSync(path.join(target, ".wharf-ready"))) {
    o.log.line(`Python environment ${key} is cached: reusing it`);
    return;
  }
  const staging = `${envs}.${o.revisionId}`;
  fs.rmSync(staging, { recursive: true, force: true });
  fs.mkdirSync(staging, { mode: 0o755 });
  try {
    o.log.line(
      `creating the Python environment ${key} (the base image has no C compiler: sdists with C extensions fail)`,
    );
    const made0 = await runChild(
      "create",
      config,
      o,
      { envs: staging, writable: true, hosts },
      "installing the Python dependencies",
      true,
    );
    o.log.line(`Python environment ${key} installed with ${String(made0.installer)}`);
    const made = path.join(staging, key);
    const st = fs.lstatSync(made, { throwIfNoEntry: false });
    // Without isolation the step wrote the shared folder itself (no staging bind): nothing to move.
    if (st && !fs.existsSync(path.join(target, ".wharf-ready"))) {
      if (!st.isDirectory() || !fs.existsSync(path.join(made, ".wharf-ready")))
        throw new PythonBuildError("the Python install step left no complete environment");
      fs.rmSync(target, { recursive: true, force: true });
      fs.renameSync(made, target);
    }
    if (!fs.existsSync(path.join(target, ".wharf-ready")))
      throw new PythonBuildError(`Python environment ${key} is missing after its install`);
    o.log.line(`Python environment installed and cached as ${key}`);
  } finally {
    fs.rmSync(staging, { recursive: true, force: true });
  }
}

/** Imports the Python graphs in their worker, confined and read-only: one entry per graph. */
export async function checkPythonGraphs(
  config: { dir: string; file: string },
  o: Opts,
): Promise<Array<{ id: string; ok: boolean; error?: string }>> {
  const r = await runChild(
    "check",
    config,
    o,
    { envs: o.layout.pythonEnvsFor(o.workspaceId), writable: false },
    "loading the Python graphs",
    false,
  );
  return (r.graphs as Array<{ id: string; ok: boolean; error?: string }>) ?? [];
}
