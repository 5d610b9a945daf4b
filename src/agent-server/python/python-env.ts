import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import type { Logger } from "../../log/logger.ts";
import type { AgentProject } from "../project/project.ts";
import { envKey, installPlan, localKind, MIN_PYTHON, pythonIsRecentEnough, pythonVersionProblem, WORKER_REQUIREMENTS } from "./install-plan.ts";

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

async function exec(cmd: string, args: string[], log: Logger, what: string): Promise<string> {
  try {
    // pip and uv get the server's environment as it is (index URLs, proxies, certificates): passed on, not read as configuration.
    const { stdout } = await run(cmd, args, { maxBuffer: 64 * 1024 * 1024, env: { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: "1" } });
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

/**
 * The key of the project's cached environment (the folder name under `envsDir`); fails naming the
 * `python_version` this interpreter cannot provide. Deployment builds create the folder ahead.
 */
export async function pythonEnvKey(o: PythonEnvOptions): Promise<string> {
  const version = await baseVersion(o.python, o.log);
  const problem = pythonVersionProblem(o.project.pythonVersion ?? null, version);
  if (problem) throw new PythonEnvError(problem);
  const read = (p: string) => (fs.existsSync(p) ? fs.readFileSync(p, "utf8") : null);
  return envKey(version.split(".").slice(0, 2).join("."), o.project.dependencies, read);
}

/**
 * The interpreter for a project's worker: the project's own `.venv` if it has one (the worker's
 * needs added when missing), else a cached environment per dependency key, created with uv when it
 * is on PATH, else `python -m venv` and pip.
 */
export async function ensurePythonEnv(o: PythonEnvOptions): Promise<string> {
  const own = path.join(o.project.dir, ".venv", "bin", "python");
  if (fs.existsSync(own)) {
    const ok = await exec(own, ["-c", "import langgraph.graph, langgraph.checkpoint.sqlite.aio, orjson"], o.log, "checking .venv").then(() => true, () => false);
    if (!ok) await install(own, WORKER_REQUIREMENTS, o.log, await hasUv(o.log));
    return own;
  }
  const key = await pythonEnvKey(o);
  const dir = path.join(path.resolve(o.envsDir), key);
  const python = path.join(dir, "bin", "python");
  const marker = path.join(dir, ".wharf-ready");
  if (fs.existsSync(marker)) return python;
  fs.mkdirSync(o.envsDir, { recursive: true, mode: 0o700 });
  const release = await lock(`${dir}.lock`);
  try {
    if (fs.existsSync(marker)) return python;
    fs.rmSync(dir, { recursive: true, force: true });
    const uv = await hasUv(o.log);
    o.log.info({ dir, uv }, "creating the Python environment of the project (cached by its dependencies)");
    if (uv) await exec("uv", ["venv", "--seed", "--python", o.python, dir], o.log, "creating the virtual environment");
    else await exec(o.python, ["-m", "venv", dir], o.log, "creating the virtual environment (python3 -m venv; on Debian install python3-venv)");
    const plan = installPlan(o.project.dependencies, (d) => localKind(d));
    await install(python, plan.args, o.log, uv);
    if (plan.pathDirs.length) {
      const site = (await exec(python, ["-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], o.log, "locating site-packages")).trim();
      fs.writeFileSync(path.join(site, "wharf-project.pth"), plan.pathDirs.join("\n") + "\n");
    }
    fs.writeFileSync(marker, `${new Date().toISOString()}\n`);
    return python;
  } finally {
    release();
  }
}

async function install(python: string, args: string[], log: Logger, uv: boolean): Promise<void> {
  if (uv) await exec("uv", ["pip", "install", "--python", python, ...args], log, "installing the project's Python dependencies (uv)");
  else await exec(python, ["-m", "pip", "install", "--quiet", ...args], log, "installing the project's Python dependencies (pip)");
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
