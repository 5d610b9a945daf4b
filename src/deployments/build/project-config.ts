import path from "node:path";
import { readProjectFile } from "./project-file.ts";

export class ProjectConfigError extends Error {}

export interface ProjectConfig {
  file: string;
  dir: string;
  graphIds: string[];
  hasCustomAuth: boolean;
}

/** Reads and checks a project's langgraph.json (the part the platform itself depends on). */
export function readProjectConfig(root: string, configPath: string): ProjectConfig {
  const file = path.resolve(root, configPath);
  if (!file.startsWith(path.resolve(root) + path.sep))
    throw new ProjectConfigError(`langgraph_config_path ${configPath} points outside the project`);
  let text: string | null;
  try {
    text = readProjectFile(root, configPath);
  } catch (err) {
    throw new ProjectConfigError((err as Error).message, { cause: err });
  }
  if (text === null) throw new ProjectConfigError(`${configPath} not found in the source`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw new ProjectConfigError(`${configPath} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  const graphs = (parsed as { graphs?: unknown }).graphs;
  if (!graphs || typeof graphs !== "object" || Array.isArray(graphs) || Object.keys(graphs).length === 0) {
    throw new ProjectConfigError(`${configPath} has no "graphs" (an object of graph id to "./file.ts:export")`);
  }
  for (const [id, ref] of Object.entries(graphs))
    if (typeof ref !== "string" && typeof (ref as { path?: unknown })?.path !== "string")
      throw new ProjectConfigError(`graph ${id} in ${configPath} is not a "./file:export" string`);
  const auth = (parsed as { auth?: { path?: unknown } }).auth;
  return {
    file,
    dir: path.dirname(file),
    graphIds: Object.keys(graphs),
    hasCustomAuth: typeof auth?.path === "string",
  };
}

/** Validation for the request body: a relative path to a .json file inside the project. */
export function configPathProblem(p: string): string | null {
  if (path.isAbsolute(p) || p.split(/[\\/]/).includes(".."))
    return "langgraph_config_path must be relative to the project root and stay inside it";
  if (!p.endsWith(".json")) return "langgraph_config_path must name a .json file (usually langgraph.json)";
  return null;
}
