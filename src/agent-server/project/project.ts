import fs from "node:fs";
import path from "node:path";
import { z } from "zod";

/** A `langgraph.json` project, resolved against its folder. */
export interface AgentProject {
  dir: string;
  configFile: string;
  graphs: Array<{ graphId: string; file: string; exportName: string; description: string | null }>;
  env: Record<string, string>;
  auth: { file: string; exportName: string; disableStudioAuth: boolean } | null;
  dependencies: string[];
}

export class ProjectError extends Error {}

const graphSpec = z.union([z.string().min(1), z.object({ path: z.string().min(1), description: z.string().optional() }).passthrough()]);

const configSchema = z
  .object({
    graphs: z.record(z.string().min(1), graphSpec).refine((g) => Object.keys(g).length > 0, "at least one graph is required"),
    env: z.union([z.string(), z.record(z.string(), z.union([z.string(), z.number(), z.boolean()]))]).optional(),
    dependencies: z.array(z.string()).optional(),
    auth: z.object({ path: z.string().min(1).optional(), disable_studio_auth: z.boolean().optional() }).passthrough().optional(),
    node_version: z.union([z.string(), z.number()]).optional(),
  })
  .passthrough();

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
    if ((value.startsWith('"') && value.endsWith('"')) || (value.startsWith("'") && value.endsWith("'"))) value = value.slice(1, -1);
    else value = value.replace(/\s+#.*$/, "");
    out[m[1]] = value;
  }
  return out;
}

/** Reads `langgraph.json` from a folder (or the file itself); errors name the file and the field. */
export function loadProject(dirOrFile: string): AgentProject {
  const abs = path.resolve(dirOrFile);
  const configFile = fs.existsSync(abs) && fs.statSync(abs).isDirectory() ? path.join(abs, "langgraph.json") : abs;
  const dir = path.dirname(configFile);
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(configFile, "utf8"));
  } catch (err) {
    throw new ProjectError(`cannot read ${configFile}: ${(err as Error).message}`);
  }
  const parsed = configSchema.safeParse(raw);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".") || "(root)"}: ${i.message}`);
    throw new ProjectError(`invalid ${configFile}:\n${lines.join("\n")}`);
  }
  const cfg = parsed.data;
  const graphs = Object.entries(cfg.graphs).map(([graphId, spec]) => {
    const ref = typeof spec === "string" ? spec : spec.path;
    const { file, exportName } = splitRef(dir, ref);
    if (!fs.existsSync(file)) throw new ProjectError(`graph "${graphId}" in ${configFile}: file not found: ${file}`);
    return { graphId, file, exportName, description: typeof spec === "string" ? null : (spec.description ?? null) };
  });
  let env: Record<string, string> = {};
  if (typeof cfg.env === "string") {
    const envFile = path.resolve(dir, cfg.env);
    if (fs.existsSync(envFile)) env = parseDotenv(fs.readFileSync(envFile, "utf8"));
    else throw new ProjectError(`env file ${envFile} named in ${configFile} does not exist`);
  } else if (cfg.env) {
    env = Object.fromEntries(Object.entries(cfg.env).map(([k, v]) => [k, String(v)]));
  }
  let auth: AgentProject["auth"] = null;
  if (cfg.auth?.path) {
    const { file, exportName } = splitRef(dir, cfg.auth.path);
    if (!fs.existsSync(file)) throw new ProjectError(`auth.path in ${configFile}: file not found: ${file}`);
    auth = { file, exportName, disableStudioAuth: cfg.auth.disable_studio_auth ?? false };
  }
  const dependencies = (cfg.dependencies ?? []).map((d) => path.resolve(dir, d));
  for (const d of dependencies) {
    if (!fs.existsSync(d)) throw new ProjectError(`dependency ${d} named in ${configFile} does not exist`);
  }
  return { dir, configFile, graphs, env, auth, dependencies };
}

/** Puts the project's env into process.env without overriding what the operator already set. */
export function applyProjectEnv(project: AgentProject, env: NodeJS.ProcessEnv = process.env): void {
  for (const [k, v] of Object.entries(project.env)) if (env[k] === undefined) env[k] = v;
}
