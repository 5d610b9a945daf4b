import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { PythonBuild } from "../project/project.ts";

/**
 * What the worker itself imports; never pinned, so the user's own `langgraph` constraint wins. The
 * PostgreSQL saver (with psycopg's bundled libpq) is always there: the same environment serves a
 * project whether the server runs on SQLite or PostgreSQL.
 */
export const WORKER_REQUIREMENTS = ["langgraph", "langgraph-checkpoint-sqlite", "langgraph-checkpoint-postgres", "psycopg[binary]", "orjson", "starlette", "uvloop"];

export const MIN_PYTHON: [number, number] = [3, 11];

/** What a local dependency folder is, as the LangGraph CLI tells them apart. */
export type LocalKind = "package" | "requirements" | "plain";

export const PACKAGE_FILES = ["pyproject.toml", "setup.py", "setup.cfg"];

export function localKind(dir: string, exists: (p: string) => boolean = fs.existsSync): LocalKind {
  if (PACKAGE_FILES.some((f) => exists(path.join(dir, f)))) return "package";
  if (exists(path.join(dir, "requirements.txt"))) return "requirements";
  return "plain";
}

export interface InstallPlan {
  /** Arguments after `pip install`. */
  args: string[];
  /** Folders put on the interpreter's path with a `.pth` file (faux packages: no metadata). */
  pathDirs: string[];
}

/**
 * The one resolver call for a project (pure: table-tested): real packages installed editable (so
 * `wharf dev` sees edits), a folder with only `requirements.txt` installs those and goes on the path,
 * other strings are packages as written, then the worker's few needs.
 */
export function installPlan(dependencies: string[], kindOf: (dir: string) => LocalKind): InstallPlan {
  const args: string[] = [];
  const pathDirs: string[] = [];
  for (const d of dependencies) {
    if (!path.isAbsolute(d)) {
      args.push(d);
      continue;
    }
    const kind = kindOf(d);
    if (kind === "package") args.push("-e", d);
    else {
      if (kind === "requirements") args.push("-r", path.join(d, "requirements.txt"));
      pathDirs.push(d);
    }
  }
  return { args: [...args, ...WORKER_REQUIREMENTS], pathDirs };
}

/** What decides an environment beside its dependencies: the `langgraph.json` keys of {@link PythonBuild}, with the files they name read. */
export interface KeyInputs {
  installer: PythonBuild["installer"];
  /** The text of `pip_config_file` (null: none). */
  pipConfig: string | null;
  /** `source: {kind: "uv"}`: its package and the texts of its `uv.lock` and `pyproject.toml`. */
  uv: { package: string | null; lock: string; pyproject: string | null } | null;
}

const NO_KEY_INPUTS: KeyInputs = { installer: "auto", pipConfig: null, uv: null };

/** The environment's key: what decides its contents (interpreter version, installer, indexes, lock, dependencies and their metadata files). */
export function envKey(pythonVersion: string, dependencies: string[], read: (p: string) => string | null, inputs: KeyInputs = NO_KEY_INPUTS): string {
  const h = crypto.createHash("sha256");
  h.update(`python ${pythonVersion}\n`);
  h.update(`worker ${WORKER_REQUIREMENTS.join(",")}\n`);
  // The defaults hash as before, so environments made before these keys existed stay cached.
  if (inputs.installer !== "auto") h.update(`installer ${inputs.installer}\n`);
  if (inputs.pipConfig !== null) h.update(`pip_config_file\n${inputs.pipConfig}\n`);
  if (inputs.uv) h.update(`uv ${inputs.uv.package ?? ""}\n${inputs.uv.lock}\n${inputs.uv.pyproject ?? ""}\n`);
  for (const d of dependencies) {
    h.update(`dep ${d}\n`);
    if (!path.isAbsolute(d)) continue;
    for (const f of [...PACKAGE_FILES, "requirements.txt"]) {
      const text = read(path.join(d, f));
      if (text !== null) h.update(`${f}\n${text}\n`);
    }
  }
  return h.digest("hex").slice(0, 16);
}

/**
 * Which installer makes an environment (pure: table-tested): a uv source or `pip_installer: "uv"`
 * need uv, fetched from PyPI into the environment's own tools folder when it is not on PATH;
 * `"pip"` is pip; `"auto"` is uv when on PATH, else pip (no download for a choice nobody made).
 */
export function chooseInstaller(build: Pick<PythonBuild, "installer" | "uv">, uvOnPath: boolean): { installer: "uv" | "pip"; fetchUv: boolean } {
  if (build.uv || build.installer === "uv") return { installer: "uv", fetchUv: !uvOnPath };
  if (build.installer === "pip") return { installer: "pip", fetchUv: false };
  return { installer: uvOnPath ? "uv" : "pip", fetchUv: false };
}

/** Why the host interpreter cannot serve a project asking for `python_version`, or null (pure). */
export function pythonVersionProblem(requested: string | null, host: string): string | null {
  if (!requested) return null;
  const [rMaj, rMin] = requested.split(".").map(Number);
  const [hMaj, hMin] = host.split(".").map(Number);
  if (hMaj > rMaj || (hMaj === rMaj && hMin >= rMin)) return null;
  return `langgraph.json asks for python_version ${requested}; this host's interpreter is ${host} (set WHARF_PYTHON to a Python ${requested} or newer)`;
}

/** `"3.11.7"` → whether it is at least {@link MIN_PYTHON} (pure). */
export function pythonIsRecentEnough(version: string): boolean {
  const [maj, min] = version.split(".").map(Number);
  return maj > MIN_PYTHON[0] || (maj === MIN_PYTHON[0] && min >= MIN_PYTHON[1]);
}
