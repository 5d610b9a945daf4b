import fs from "node:fs";
import path from "node:path";
import { processEnvironment } from "../../config/index.ts";
import { configSchema, ignoredKeys, type ProjectConfig } from "./project-config.ts";

/** A `langgraph.json` project, resolved against its folder. */
export interface AgentProject {
  dir: string;
  configFile: string;
  graphs: ProjectGraph[];
  env: Record<string, string>;
  /** `auth.path`: a JavaScript `Auth` (imported here) or a Python `langgraph_sdk.Auth` (`runtime: "python"`, imported by the worker from `ref`). */
  auth: {
    file: string;
    exportName: string;
    disableStudioAuth: boolean;
    runtime: GraphRuntime;
    ref: string;
    cache: AuthCacheConfig | null;
  } | null;
  dependencies: string[];
  /** `python_version` ("3.12"): the Python graphs need at least this interpreter. */
  pythonVersion: string | null;
  /** How the Python environment is installed: `pip_installer`, `pip_config_file`, `source: {kind: "uv"}`. */
  pythonBuild: PythonBuild;
  http: ProjectHttp;
  store: ProjectStore;
  /**
   * `checkpointer.ttl`: threads not updated for `defaultTtlMinutes` are, at each sweep, deleted
   * (`delete`) or pruned to their latest checkpoint, the thread kept (`keep_latest`).
   */
  checkpointerTtl: { strategy: "delete" | "keep_latest"; defaultTtlMinutes: number; sweepMinutes: number } | null;
  /**
   * `checkpointer.path` (the project's own Python saver, `./saver.py:make` or `pkg.mod:attr`, as
   * written) and `checkpointer.serde` (the Python serializer's options): honoured by the Python
   * worker, which owns Python graphs' checkpoints.
   */
  pythonCheckpointer: { path: string | null; serde: Record<string, unknown> | null };
  /** `ui`: generative UI modules by graph name (absolute paths), bundled at start. */
  ui: Record<string, string>;
  /** Keys of `langgraph.json` this server does not use, each with why (logged as warnings). */
  warnings: string[];
}

/** One graph of `langgraph.json`: JavaScript (imported by this server) or Python (served by the Python worker). */
export interface ProjectGraph {
  graphId: string;
  /** The file (for a module-syntax Python graph, the project folder). */
  file: string;
  exportName: string;
  description: string | null;
  runtime: GraphRuntime;
  /** The reference as written (`./src/agent/graph.py:graph`, `pkg.mod:attr`): what the Python worker imports. */
  ref: string;
}

export type GraphRuntime = "js" | "python";

/** The keys of `langgraph.json` that decide how a Python environment is installed (paths absolute). */
export interface PythonBuild {
  /** `pip_installer`: `auto` uses uv when it is on PATH, pip otherwise. */
  installer: "auto" | "uv" | "pip";
  /** `pip_config_file`: pip's configuration for every install (its indexes are reachable from the build). */
  pipConfigFile: string | null;
  /** `source: {kind: "uv", root, package}`: the project's `uv.lock` decides every version (`uv sync --frozen`). */
  uv: { root: string; package: string | null } | null;
}

/** `auth.cache`: authenticate results kept per value of these request headers (Python auth). */
export interface AuthCacheConfig {
  cacheKeys: string[];
  ttlSeconds: number;
  maxSize: number;
}

const JS_EXT = /\.(?:[cm]?[jt]s|[jt]sx)$/;

/**
 * The runtime of a graph reference (pure: table-tested): a `.py` file is Python; so is module
 * syntax (`pkg.mod:attr`: no path separator and no JavaScript extension), as the LangGraph CLI reads it.
 */
export function graphRuntime(ref: string): GraphRuntime {
  const idx = ref.lastIndexOf(":");
  const target = idx > 1 ? ref.slice(0, idx) : ref;
  if (target.endsWith(".py")) return "python";
  if (JS_EXT.test(target) || target.includes("/") || target.includes("\\")) return "js";
  return /^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$/.test(target) && idx > 1 ? "python" : "js";
}

export interface ProjectHttp {
  /**
   * `http.app`: the project's own Hono app, mounted before the API routes, or (`runtime: "python"`,
   * `./app.py:app` / `pkg.mod:app`) a Starlette/FastAPI app the Python worker serves.
   */
  app: { file: string; exportName: string; runtime: GraphRuntime; ref: string } | null;
  disable: { assistants: boolean; threads: boolean; runs: boolean; store: boolean; meta: boolean };
  cors: CorsConfig | null;
}

export interface CorsConfig {
  allow_origins?: string[];
  allow_origin_regex?: string;
  allow_methods?: string[];
  allow_headers?: string[];
  allow_credentials?: boolean;
  expose_headers?: string[];
  max_age?: number;
}

/**
 * `store.index.embed`: a JavaScript function (`./embed.ts:embed`), or, in a project with Python graphs,
 * a Python one (`./embed.py:embed`, `pkg.mod:fn`) or a provider string (`openai:text-embedding-3-small`)
 * that the Python worker resolves (`ref` as written).
 */
export interface ProjectEmbed {
  file: string;
  exportName: string;
  runtime: GraphRuntime;
  ref: string;
}

export interface ProjectStore {
  /** `store.index`: semantic search with the project's `embed` function over `fields` of each value. */
  index: { dims: number; embed: ProjectEmbed; fields: string[] } | null;
  /** `store.ttl` (minutes): items expire; reads refresh the expiry when `refreshOnRead`. */
  ttl: { defaultTtlMinutes: number | null; refreshOnRead: boolean; sweepMinutes: number } | null;
}

export class ProjectError extends Error {}

/** `.`, `./pkg`, `/abs`: a local folder (pure); `langchain-openai>=1`, `git+https://…`: a package. */
export const isLocalDependency = (d: string): boolean =>
  d === "." || d === ".." || d.startsWith("./") || d.startsWith("../") || path.isAbsolute(d);

/** `./src/agent.ts:graph` → file and export name (`default` when omitted). */
export function splitRef(dir: string, ref: string): { file: string; exportName: string } {
  // A Windows drive letter is not an export separator; otherwise the last colon splits.
  const idx = ref.lastIndexOf(":");
  const hasExport = idx > 1 || (idx === 1 && !/^[a-zA-Z]:[\\/]/.test(ref));
  const fileRef = hasExport ? ref.slice(0, idx) : ref;
  const exportName = hasExport ? ref.slice(idx + 1) || "default" : "default";
  return { file: path.resolve(dir, fileRef), exportName };
}

/** Parses a `.env` file: `KEY=value` lines, optional quotes, `#` comments. */
export function parseDotenv(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split(/\r?\n/)) {
    const line = raw.trim();
    if (!line || line.startsWith("#")) continue;
    const m = /^(?:export\s+)?([A-Za-z_][A-Za-z0-9_.-]*)\s*=\s*(.*)$/.exec(line);
    if (!m) continue;
    let value = m[2].trim();
    if ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'")))
      value = value.slice(1, -1);
    else value = value.replace(/\s+#.*$/, "");
    out[m[1]] = value;
  }
  return out;
}

/** Reads `langgraph.json` from a folder (or the file itself); errors name the file and the field. */
export function loadProject(dirOrFile: string): AgentProject {
  const { raw, cfg, at } = readConfig(dirOrFile);
  const { dir, configFile } = at;
  const graphs = projectGraphs(cfg, at);
  const warnings = ignoredKeys(raw as Record<string, unknown>);
  const env = projectEnv(cfg, dir, warnings);
  const auth = projectAuth(cfg, at, warnings);
  // Local folders are resolved and checked; anything else is a package (PyPI name, `git+https` URL) for the Python installer.
  const dependencies = (cfg.dependencies ?? []).map((d) => (isLocalDependency(d) ? path.resolve(dir, d) : d));
  for (const d of dependencies) {
    if (path.isAbsolute(d) && !fs.existsSync(d))
      throw new ProjectError(`dependency ${d} named in ${configFile} does not exist`);
  }
  const http = projectHttp(cfg, at);
  const store = projectStore(cfg, at, graphs, warnings);
  const { checkpointerTtl, pythonCheckpointer } = projectCheckpointer(cfg, at);
  const ui = Object.fromEntries(
    Object.entries(cfg.ui ?? {}).map(([name, file]) => {
      const abs = path.resolve(dir, file);
      if (!fs.existsSync(abs)) throw new ProjectError(`ui "${name}" in ${configFile}: file not found: ${abs}`);
      return [name, abs];
    }),
  );
  const pythonVersion = cfg.python_version !== undefined ? String(cfg.python_version) : null;
  const hasPython = graphs.some((g) => g.runtime === "python") || auth?.runtime === "python";
  if (pythonVersion && !hasPython)
    warnings.push(`"python_version" applies to Python graphs and this project has none: it is ignored`);
  for (const k of ["path", "serde"] as const)
    if (cfg.checkpointer?.[k] && !hasPython)
      warnings.push(`"checkpointer.${k}" applies to Python graphs and this project has none: it is ignored`);
  const pythonBuild = pythonBuildOf(cfg, dir, configFile);
  return {
    dir,
    configFile,
    graphs,
    env,
    auth,
    dependencies,
    pythonVersion,
    pythonBuild,
    http,
    store,
    checkpointerTtl,
    pythonCheckpointer,
    ui,
    warnings,
  };
}

/** Where the project's `langgraph.json` is: relative paths resolve against `dir`, errors name `configFile`. */
interface ConfigSite {
  dir: string;
  configFile: string;
}

function readConfig(dirOrFile: string): { raw: unknown; cfg: ProjectConfig; at: ConfigSite } {
  const abs = path.resolve(dirOrFile);
  const configFile = fs.existsSync(abs) && fs.statSync(abs).isDirectory() ? path.join(abs, "langgraph.json") : abs;
  const dir = path.dirname(configFile);
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(configFile, "utf8"));
  } catch (err) {
    throw new ProjectError(`cannot read ${configFile}: ${(err as Error).message}`, { cause: err });
  }
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".") || "(root)"}: ${i.message}`);
    throw new ProjectError(`invalid ${configFile}:\n${lines.join("\n")}`);
  }
  return { raw, cfg: parsed.data, at: { dir, configFile } };
}

/** `pkg.mod:attr` (no `.py` file): a Python module found on the Python path at import. */
const isModuleSyntax = (runtime: GraphRuntime, ref: string): boolean =>
  runtime === "python" && !ref.slice(0, ref.lastIndexOf(":")).endsWith(".py");

/** A `file:export` reference whose file must exist; the error names the field. */
function existingRef(at: ConfigSite, where: string, r: string): { file: string; exportName: string } {
  const out = splitRef(at.dir, r);
  if (!fs.existsSync(out.file)) throw new ProjectError(`${where} in ${at.configFile}: file not found: ${out.file}`);
  return out;
}

function projectGraphs(cfg: ProjectConfig, { dir, configFile }: ConfigSite): ProjectGraph[] {
  return Object.entries(cfg.graphs).map(([graphId, spec]) => {
    const ref = typeof spec === "string" ? spec : spec.path;
    const description = typeof spec === "string" ? null : (spec.description ?? null);
    const runtime = graphRuntime(ref);
    // A module-syntax graph is found on the Python path at import; the worker reports it if not.
    if (isModuleSyntax(runtime, ref))
      return { graphId, file: dir, exportName: ref.slice(ref.lastIndexOf(":") + 1), description, runtime, ref };
    const { file, exportName } = splitRef(dir, ref);
    if (!fs.existsSync(file)) throw new ProjectError(`graph "${graphId}" in ${configFile}: file not found: ${file}`);
    return { graphId, file, exportName, description, runtime, ref };
  });
}

function projectEnv(cfg: ProjectConfig, dir: string, warnings: string[]): Record<string, string> {
  if (typeof cfg.env === "string") {
    const envFile = path.resolve(dir, cfg.env);
    // As `langgraph dev`: the templates name `.env` and ship only `.env.example`.
    if (fs.existsSync(envFile)) return parseDotenv(fs.readFileSync(envFile, "utf8"));
    warnings.push(`env file ${envFile} does not exist: no variables loaded from it`);
    return {};
  }
  return cfg.env ? Object.fromEntries(Object.entries(cfg.env).map(([k, v]) => [k, String(v)])) : {};
}

function projectAuth(cfg: ProjectConfig, { dir, configFile }: ConfigSite, warnings: string[]): AgentProject["auth"] {
  if (!cfg.auth?.path) return null;
  const ref = cfg.auth.path;
  const runtime = graphRuntime(ref);
  const { file, exportName } = splitRef(dir, ref);
  if (!isModuleSyntax(runtime, ref) && !fs.existsSync(file))
    throw new ProjectError(`auth.path in ${configFile}: file not found: ${file}`);
  const c = cfg.auth.cache;
  const cache = c
    ? {
        cacheKeys: c.cache_keys.map((k) => k.toLowerCase()),
        ttlSeconds: c.ttl_seconds ?? 60,
        maxSize: c.max_size ?? 1000,
      }
    : null;
  if (cache && runtime !== "python")
    warnings.push(`"auth.cache" applies to Python auth handlers only; it is ignored for ${ref}`);
  return { file, exportName, disableStudioAuth: cfg.auth.disable_studio_auth ?? false, runtime, ref, cache };
}

function projectHttp(cfg: ProjectConfig, at: ConfigSite): ProjectHttp {
  const h = cfg.http ?? {};
  const httpApp = (r: string) => {
    const runtime = graphRuntime(r);
    return {
      ...(isModuleSyntax(runtime, r)
        ? { file: at.dir, exportName: r.slice(r.lastIndexOf(":") + 1) }
        : existingRef(at, "http.app", r)),
      runtime,
      ref: r,
    };
  };
  return {
    app: h.app ? httpApp(h.app) : null,
    disable: {
      assistants: !!h.disable_assistants,
      threads: !!h.disable_threads,
      runs: !!h.disable_runs,
      store: !!h.disable_store,
      meta: !!h.disable_meta,
    },
    cors: h.cors ?? null,
  };
}

function projectStore(cfg: ProjectConfig, at: ConfigSite, graphs: ProjectGraph[], warnings: string[]): ProjectStore {
  const idx = cfg.store?.index;
  const ttl = cfg.store?.ttl;
  // A path ("./embed.ts:embed") is the project's function; "openai:text-embedding-3-small" names a
  // provider model that needs its SDK and network access.
  const embedIsPath = !!idx && (idx.embed.startsWith(".") || path.isAbsolute(idx.embed));
  const pythonProject = graphs.some((g) => g.runtime === "python");
  // In a project with Python graphs, a provider string or module syntax is the Python worker's to resolve.
  const embedRuntime: GraphRuntime =
    idx &&
    (embedIsPath
      ? graphRuntime(idx.embed) === "python" && idx.embed.slice(0, idx.embed.lastIndexOf(":")).endsWith(".py")
      : pythonProject)
      ? "python"
      : "js";
  if (idx && !embedIsPath && embedRuntime === "js")
    warnings.push(
      `"store.index.embed" = "${idx.embed}" names a provider model; give a module path ("./src/embed.ts:embed") instead: semantic search is off`,
    );
  const embed =
    idx && (embedIsPath || embedRuntime === "python")
      ? {
          ...(embedIsPath ? existingRef(at, "store.index.embed", idx.embed) : { file: at.dir, exportName: "" }),
          runtime: embedRuntime,
          ref: idx.embed,
        }
      : null;
  return {
    index: idx && embed ? { dims: idx.dims, embed, fields: idx.fields?.length ? idx.fields : ["$"] } : null,
    ttl: ttl
      ? {
          defaultTtlMinutes: ttl.default_ttl ?? null,
          refreshOnRead: ttl.refresh_on_read ?? true,
          sweepMinutes: ttl.sweep_interval_minutes ?? 60,
        }
      : null,
  };
}

function projectCheckpointer(
  cfg: ProjectConfig,
  at: ConfigSite,
): Pick<AgentProject, "checkpointerTtl" | "pythonCheckpointer"> {
  const cttl = cfg.checkpointer?.ttl;
  const checkpointerTtl = cttl
    ? {
        strategy: cttl.strategy ?? "delete",
        defaultTtlMinutes: cttl.default_ttl,
        sweepMinutes: cttl.sweep_interval_minutes ?? 60,
      }
    : null;
  const cp = cfg.checkpointer;
  if (cp?.path && graphRuntime(cp.path) === "python" && cp.path.slice(0, cp.path.lastIndexOf(":")).endsWith(".py"))
    existingRef(at, "checkpointer.path", cp.path);
  return { checkpointerTtl, pythonCheckpointer: { path: cp?.path ?? null, serde: cp?.serde ?? null } };
}

/** `pip_installer`, `pip_config_file` and `source`, resolved and checked as the LangGraph CLI does. */
function pythonBuildOf(cfg: ProjectConfig, dir: string, configFile: string): PythonBuild {
  let pipConfigFile: string | null = null;
  if (cfg.pip_config_file) {
    pipConfigFile = path.resolve(dir, cfg.pip_config_file);
    if (!fs.existsSync(pipConfigFile))
      throw new ProjectError(`pip_config_file in ${configFile}: file not found: ${pipConfigFile}`);
  }
  let uv: PythonBuild["uv"] = null;
  if (cfg.source) {
    if (cfg.dependencies?.length)
      throw new ProjectError(
        `${configFile}: "dependencies" cannot be combined with source kind "uv": uv.lock decides what is installed`,
      );
    if (cfg.pip_installer === "pip")
      throw new ProjectError(
        `${configFile}: source kind "uv" is installed with uv; pip_installer "pip" contradicts it`,
      );
    const root = path.resolve(dir, cfg.source.root ?? ".");
    if (!fs.existsSync(path.join(root, "uv.lock")))
      throw new ProjectError(
        `source kind "uv" in ${configFile}: no uv.lock in ${root} (run \`uv lock\` and commit it)`,
      );
    uv = { root, package: cfg.source.package ?? null };
  }
  return { installer: cfg.pip_installer ?? "auto", pipConfigFile, uv };
}

/** Puts the project's env into the process's environment without overriding what the operator already set. */
export function applyProjectEnv(project: AgentProject, env: NodeJS.ProcessEnv = processEnvironment()): void {
  for (const [k, v] of Object.entries(project.env)) if (env[k] === undefined) env[k] = v;
}
