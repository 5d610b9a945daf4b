import path from "node:path";
import type { AgentServerOptions } from "./server.ts";
import { CustomAuth } from "./auth/custom-auth.ts";
import type { AgentServerContext } from "./context.ts";
import { loadGraphs, type LoadedGraph, type LoadedGraphs } from "./project/graphs.ts";
import { needsStaticSchemas } from "./project/graph-schemas.ts";
import { loadHttpApp } from "./project/http-app.ts";
import type { AgentProject } from "./project/project.ts";
import { GraphSchemaCache } from "./project/static-schemas.ts";
import { buildUiBundles } from "./project/ui-bundles.ts";
import { startPythonRuntime, type PythonRuntime } from "./python/index.ts";
import { pythonSettings } from "./python/prestart.ts";
import { loadEmbed, type StoreIndex } from "./storage/store-index.ts";

/** What the project's JavaScript side brings: its graphs, auth, own routes and UI bundles. */
export interface JsSide {
  js: LoadedGraphs;
  jsAuth: CustomAuth | null;
  userApp: AgentServerContext["userApp"];
  ui: AgentServerContext["ui"];
  schemas: GraphSchemaCache;
}

/** The project's code, whichever runtime serves each part. */
export interface ProjectCode {
  graphs: AgentServerContext["graphs"];
  failures: AgentServerContext["graphFailures"];
  customAuth: AgentServerContext["customAuth"];
  userApp: AgentServerContext["userApp"];
  ui: AgentServerContext["ui"];
  schemas: GraphSchemaCache;
  python: PythonRuntime | null;
  index: StoreIndex | null;
}

/** Imports the project's JavaScript graphs, auth, routes and UI (a graph that fails is logged, the others serve). */
export async function loadJsSide(project: AgentProject, options: AgentServerOptions): Promise<JsSide> {
  const js = await loadGraphs(project);
  const schemas = new GraphSchemaCache(
    project.dir,
    project.graphs,
    path.join(options.home, "graph-schemas"),
    options.log,
  );
  // Started before the rest of the start-up: the type checker runs alongside it in its own process.
  if (options.warmSchemas) void warmSchemas(schemas, js.graphs);
  for (const [graphId, f] of js.failures)
    options.log.error(
      { graphId, module: f.module, error: f.error },
      `graph "${graphId}" did not load (${f.module}): ${f.error}; the other graphs still serve`,
    );
  for (const w of project.warnings) options.log.warn({ configFile: project.configFile }, `langgraph.json: ${w}`);
  const jsAuth = project.auth?.runtime === "python" ? null : await CustomAuth.load(project);
  const userApp = await loadHttpApp(project);
  const ui = await buildUiBundles(project.ui, options.log);
  return { js, jsAuth, userApp, ui, schemas };
}

/** Starts the project's Python workers (when it has Python parts) and joins both runtimes' graphs. */
export async function addPythonSide(
  project: AgentProject,
  options: AgentServerOptions,
  side: JsSide,
): Promise<ProjectCode> {
  const { js, jsAuth, userApp, ui, schemas } = side;
  const python = await startPythonRuntime(
    {
      project,
      home: options.home,
      databaseUrl: options.databaseUrl,
      pgSchema: options.pgSchema,
      ...pythonSettings(options.home),
      log: options.log,
    },
    options.earlyPython,
  );
  const index = await storeIndex(project, options, python);
  // Ordered as in langgraph.json, whichever runtime serves each graph.
  const graphs = new Map(
    project.graphs.flatMap((g) => {
      const loaded = js.graphs.get(g.graphId) ?? python?.graphs.get(g.graphId);
      return loaded ? [[g.graphId, loaded] as const] : [];
    }),
  );
  const failures = new Map([...js.failures, ...(python?.failures ?? [])]);
  const customAuth = python?.auth ?? jsAuth;
  for (const [graphId, f] of python?.failures ?? [])
    options.log.error(
      { graphId, module: f.module, error: f.error },
      `python graph "${graphId}" did not load (${f.module}): ${f.error}; the other graphs still serve`,
    );
  return { graphs, failures, customAuth, userApp, ui, schemas, python, index };
}

/** `store.index` with its embedding function, or null when the project has none or it did not load. */
async function storeIndex(
  project: AgentProject,
  options: AgentServerOptions,
  python: PythonRuntime | null,
): Promise<StoreIndex | null> {
  const idx = project.store.index;
  const embed = !idx ? null : idx.embed.runtime === "python" ? (python?.embed ?? null) : await loadEmbed(idx.embed);
  if (idx && !embed)
    options.log.warn(
      { embed: idx.embed.ref },
      `store.index.embed "${idx.embed.ref}" did not load in the Python worker: semantic search is off`,
    );
  return idx && embed ? { dims: idx.dims, fields: idx.fields, embed } : null;
}

/** Starts deriving, in the background, the TypeScript-typed schemas of the graphs that have no runtime schema. */
async function warmSchemas(schemas: GraphSchemaCache, graphs: Map<string, LoadedGraph>): Promise<void> {
  const ids: string[] = [];
  for (const [id, loaded] of graphs)
    if (await needsStaticSchemas(() => loaded.get({ configurable: {} }, null), schemas.fileOf(id))) ids.push(id);
  schemas.warm(ids);
}
