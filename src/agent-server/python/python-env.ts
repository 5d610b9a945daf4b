import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import type { Logger } from "../../log/logger.ts";
import type { AgentProject } from "../project/project.ts";
import type { PythonBuild } from "../project/project.ts";
import { chooseInstaller, envKey, installPlan, type KeyInputs, localKind, MIN_PYTHON, pythonIsRecentEnough, pythonVersionProblem, WORKER_REQUIREMENTS } from "./install-plan.ts";
import { pipConfigIndexes, uvIndexArgs } from "./pip-config.ts";
import { processEnvironment } from "../../config/index.ts";

const run = promisify(execFile);

export class PythonEnvError extends Error {}

export interface PythonEnvOptions {
  project: AgentProject;
  /** The interpreter that creates environments (`WHARF_PYTHON`). */
  python: string;
  /** Folder of cached environments (`WHARF_PYTHON_ENVS`). */
  envsDir: string;
  log: Logger;
}

async function exec(cmd: string, args: string[], log: Logger, what: string, opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<string> {
  try {
    // pip and uv get the server's environment as it is (index URLs, proxies, certificates): passed on, not read as configuration.
    const { stdout } = await run(cmd, args, { maxBuffer: 64 * 1024 * 1024, cwd: opts.cwd, env: { ...processEnvironment(), PIP_DISABLE_PIP_VERSION_CHECK: "1", ...opts.env } });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; code?: string };
    if (e.code === "ENOENT") throw new PythonEnvError(`${what}: ${cmd} not found`, { cause: err });
    const tail = `${e.stdout ?? ""}${e.stderr ?? ""}`.trim().split("\n").slice(-25).join("\n");
    log.error({ cmd, args }, `${what} failed`);
    throw new PythonEnvError(`${what} failed:\n${tail}`, { cause: err });
  }
}

/** The base interpreter's version, or a clear error when it is missing or older than 3.11. */
export async function baseVersion(python: string, log: Logger): Promise<string> {
  let version: string;
  try {
    version = (await exec(python, ["-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"], log, "checking Python")).trim();
  } catch (err) {
    throw new PythonEnvError(`this project has Python graphs, which need Python ${MIN_PYTHON.join(".")} or newer: ${python} is not available (install python3 and python3-venv, or set WHARF_PYTHON)`, { cause: err });
  }
  if (!pythonIsRecentEnough(version)) throw new PythonEnvError(`this project has Python graphs, which need Python ${MIN_PYTHON.join(".")} or newer; ${python} is ${version} (set WHARF_PYTHON to a newer interpreter)`);
  return version;
}

const hasUv = async (log: Logger) => exec("uv", ["--version"], log, "uv").then(() => true, () => false);

const DEFAULT_BUILD: PythonBuild = { installer: "auto", pipConfigFile: null, uv: null };
/** Projects built in code (tests, the client's own environment) may leave the build keys out. */
const buildOf = (project: AgentProject): PythonBuild => project.pythonBuild ?? DEFAULT_BUILD;
const readText = (p: string) => (fs.existsSync(p) ? fs.readFileSync(p, "utf8") : null);

function keyInputs(build: PythonBuild): KeyInputs {
  const uv = build.uv ? { package: build.uv.package, lock: readText(path.join(build.uv.root, "uv.lock")) ?? "", pyproject: readText(path.join(build.uv.root, "pyproject.toml")) } : null;
  return { installer: build.installer, pipConfig: build.pipConfigFile ? readText(build.pipConfigFile) : null, uv };
}

/**
 * The key of the project's cached environment (the folder name under `envsDir`); fails naming the
 * `python_version` this interpreter cannot provide. Deployment builds create the folder ahead.
 */
export async function pythonEnvKey(o: PythonEnvOptions): Promise<string> {
  const version = await baseVersion(o.python, o.log);
  const problem = pythonVersionProblem(o.project.pythonVersion ?? null, version);
  if (problem) throw new PythonEnvError(problem);
  return envKey(version.split(".").slice(0, 2).join("."), o.project.dependencies, readText, keyInputs(buildOf(o.project)));
}

/** Where an environment made by {@link createPythonEnv} is, and how it was made (`cached`: it already was). */
export interface PythonEnvResult {
  python: string;
  installer: "uv" | "pip" | "own .venv";
  cached: boolean;
}

/**
 * The interpreter for a project's worker: the project's own `.venv` if it has one (the worker's
 * needs added when missing), else a cached environment per dependency key, created with uv when it
 * is on PATH, else `python -m venv` and pip.
 */
export async function ensurePythonEnv(o: PythonEnvOptions): Promise<string> {
  return (await createPythonEnv(o)).python;
}

export async function createPythonEnv(o: PythonEnvOptions): Promise<PythonEnvResult> {
  const own = path.join(o.project.dir, ".venv", "bin", "python");
  if (fs.existsSync(own)) {
    const ok = await exec(own, ["-c", "import langgraph.graph, langgraph.checkpoint.sqlite.aio, langgraph.checkpoint.postgres.aio, orjson"], o.log, "checking .venv").then(() => true, () => false);
    if (!ok) {
      const uv = await hasUv(o.log);
      await install({ python: own, args: WORKER_REQUIREMENTS, log: o.log, uv: uv ? "uv" : null, build: buildOf(o.project) });
    }
    return { python: own, installer: "own .venv", cached: ok };
  }
  // Both checks start a process: side by side, as every served Python project waits for them.
  const [key, uvOnPath] = await Promise.all([pythonEnvKey(o), hasUv(o.log)]);
  const dir = path.join(path.resolve(o.envsDir), key);
  const python = path.join(dir, "bin", "python");
  const marker = path.join(dir, ".wharf-ready");
  const build = buildOf(o.project);
  const { installer, fetchUv } = chooseInstaller(build, uvOnPath);
  if (fs.existsSync(marker)) return { python, installer, cached: true };
  fs.mkdirSync(o.envsDir, { recursive: true, mode: 0o700 });
  const release = await lock(`${dir}.lock`);
  try {
    if (fs.existsSync(marker)) return { python, installer, cached: true };
    fs.rmSync(dir, { recursive: true, force: true });
    o.log.info({ dir, installer, fetchUv }, "creating the Python environment of the project (cached by its dependencies)");
    let uv: string | null = null;
    if (installer === "uv" && !fetchUv) {
      uv = "uv";
      await exec(uv, ["venv", "--seed", "--python", o.python, dir], o.log, "creating the virtual environment", { env: UV_ENV });
    } else {
      await exec(o.python, ["-m", "venv", dir], o.log, "creating the virtual environment (python3 -m venv; on Debian install python3-venv)");
    }
    if (fetchUv) uv = await fetchUvInto(dir, python, build, o.log);
    if (build.uv) await uvSync(uv!, dir, o.python, build.uv, o.log);
    // A uv source has no `dependencies` (its lock has them): only the worker's needs are added.
    const plan = installPlan(build.uv ? [] : o.project.dependencies, (d) => localKind(d));
    await install({ python, args: plan.args, log: o.log, uv, build });
    if (plan.pathDirs.length) {
      const site = (await exec(python, ["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], o.log, "locating site-packages")).trim();
      fs.writeFileSync(path.join(site, "wharf-project.pth"), plan.pathDirs.join("\n") + "\n");
    }
    fs.writeFileSync(marker, `${new Date().toISOString()}\n`);
    return { python, installer, cached: false };
  } finally {
    release();
  }
}

/** uv never downloads an interpreter behind the platform's back: `python_version` is the host's to provide. */
const UV_ENV = { UV_PYTHON_DOWNLOADS: "never", UV_NO_PROGRESS: "1" };

/** The folder inside an environment that holds the uv fetched for it (beside, not in, its site-packages). */
export const UV_TOOLS = ".wharf-uv";

/** uv from PyPI (a wheel carrying its binary), installed with the environment's own pip into its tools folder. */
async function fetchUvInto(dir: string, python: string, build: PythonBuild, log: Logger): Promise<string> {
  const target = path.join(dir, UV_TOOLS);
  await exec(python, ["-m", "pip", "install", "--quiet", "--target", target, "uv"], log, "fetching uv from PyPI (it is not on PATH)", { env: pipEnv(build) });
  return path.join(target, "bin", "uv");
}

/** `uv sync --frozen`: exactly what the project's uv.lock says, into the environment being made. */
async function uvSync(uv: string, dir: string, python: string, source: NonNullable<PythonBuild["uv"]>, log: Logger): Promise<void> {
  const args = ["sync", "--frozen", "--no-dev", "--python", python, ...(source.package ? ["--package", source.package] : [])];
  await exec(uv, args, log, "installing the project from its uv.lock (uv sync --frozen)", { cwd: source.root, env: { ...UV_ENV, UV_PROJECT_ENVIRONMENT: dir } });
}

/** pip reads the project's `pip_config_file` itself. */
const pipEnv = (build: PythonBuild): Record<string, string> => (build.pipConfigFile ? { PIP_CONFIG_FILE: build.pipConfigFile } : {});

async function install(o: { python: string; args: string[]; log: Logger; uv: string | null; build: PythonBuild }): Promise<void> {
  if (o.uv) {
    // uv does not read pip's configuration: the same indexes as flags.
    const ix = o.build.pipConfigFile ? uvIndexArgs(pipConfigIndexes(readText(o.build.pipConfigFile) ?? "")) : [];
    await exec(o.uv, ["pip", "install", "--python", o.python, ...ix, ...o.args], o.log, "installing the project's Python dependencies (uv)", { env: UV_ENV });
  } else await exec(o.python, ["-m", "pip", "install", "--quiet", ...o.args], o.log, "installing the project's Python dependencies (pip)", { env: pipEnv(o.build) });
}

/** A folder lock between processes creating the same environment (tests share one cache). */
async function lock(dir: string): Promise<() => void> {
  const deadline = Date.now() + 15 * 60_000;
  for (;;) {
    try {
      fs.mkdirSync(dir);
      fs.writeFileSync(path.join(dir, "pid"), String(process.pid));
      return () => fs.rmSync(dir, { recursive: true, force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      let pid = 0;
      try {
        pid = Number(fs.readFileSync(path.join(dir, "pid"), "utf8").trim() || 0);
      } catch {
        // The holder has not written its pid yet: wait for it.
      }
      if (pid && !alive(pid)) fs.rmSync(dir, { recursive: true, force: true });
      else if (Date.now() > deadline) throw new PythonEnvError(`timed out waiting for ${dir}`);
      else await new Promise((r) => setTimeout(r, 500));
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    // ESRCH: the process that held the lock is gone.
    return false;
  }
}
