/**
 * Run as a child process by the builder (never imported by the platform): imports every graph of
 * a langgraph.json project, and its auth module, the way the agent server will, and prints one
 * JSON line with what it found. A separate process keeps user code out of the control plane and
 * gives each build a fresh module cache.
 */
import fs from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { graphRuntime } from "../project/project.ts";

interface Result {
  graphs: Array<{ id: string; ok: boolean; error?: string }>;
  auth: { ok: boolean; error?: string } | null;
}

function splitRef(ref: string): { file: string; exportName: string } {
  const i = ref.lastIndexOf(":");
  // A Windows drive letter or a path without `:export` means the default export.
  if (i <= 1) return { file: ref, exportName: "default" };
  return { file: ref.slice(0, i), exportName: ref.slice(i + 1) };
}

async function loadExport(dir: string, ref: string): Promise<unknown> {
  const { file, exportName } = splitRef(ref);
  const full = path.resolve(dir, file);
  if (!fs.existsSync(full)) throw new Error(`file ${file} does not exist`);
  const mod = (await import(pathToFileURL(full).href)) as Record<string, unknown>;
  if (!(exportName in mod) || mod[exportName] === undefined)
    throw new Error(`${file} has no export named ${exportName}`);
  return mod[exportName];
}

function looksLikeGraph(value: unknown): boolean {
  if (typeof value === "function") return true; // a factory
  if (!value || typeof value !== "object") return false;
  const v = value as Record<string, unknown>;
  return typeof v.invoke === "function" || typeof v.compile === "function" || typeof v.stream === "function";
}

const configFile = process.argv[2];
const config = JSON.parse(fs.readFileSync(configFile, "utf8")) as {
  graphs?: Record<string, string | { path: string }>;
  auth?: { path?: string };
};
const dir = path.dirname(configFile);
const result: Result = { graphs: [], auth: null };
for (const [id, entry] of Object.entries(config.graphs ?? {})) {
  const ref = typeof entry === "string" ? entry : entry.path;
  // Python graphs are imported by their own worker in the Python check step.
  if (graphRuntime(ref) === "python") continue;
  try {
    const value = await loadExport(dir, ref);
    if (!looksLikeGraph(value))
      throw new Error(`${ref} is not a graph (expected a compiled graph, a StateGraph or a factory function)`);
    result.graphs.push({ id, ok: true });
  } catch (err) {
    result.graphs.push({ id, ok: false, error: (err as Error).stack ?? String(err) });
  }
}
if (config.auth?.path && graphRuntime(config.auth.path) === "js") {
  try {
    await loadExport(dir, config.auth.path);
    result.auth = { ok: true };
  } catch (err) {
    result.auth = { ok: false, error: (err as Error).message };
  }
}
process.stdout.write("\n" + JSON.stringify(result) + "\n");
process.exit(0);
