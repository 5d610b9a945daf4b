import path from "node:path";
import { pathToFileURL } from "node:url";
import type { BaseCheckpointSaver } from "@langchain/langgraph";
import type { AgentProject } from "./project.ts";

/** The compiled graph type the server runs (a LangGraph `Pregel`), kept loose at this boundary. */
export type RunnableGraph = {
  stream(input: unknown, options: Record<string, unknown>): Promise<AsyncIterable<unknown>>;
  streamEvents(input: unknown, options: Record<string, unknown>): AsyncIterable<any>;
  getState(config: Record<string, unknown>, options?: Record<string, unknown>): Promise<any>;
  getStateHistory(config: Record<string, unknown>, options?: Record<string, unknown>): AsyncIterable<any>;
  updateState(config: Record<string, unknown>, values: unknown, asNode?: string): Promise<any>;
  bulkUpdateState?(
    config: Record<string, unknown>,
    supersteps: Array<{ updates: Array<{ values?: unknown; asNode?: string }> }>,
  ): Promise<any>;
  getGraphAsync(config: Record<string, unknown>): Promise<{ toJSON(): unknown }>;
  getSubgraphsAsync?(namespace?: string, recurse?: boolean): AsyncIterable<[string, RunnableGraph]>;
  checkpointer?: unknown;
  builder?: unknown;
  channels?: Record<string, unknown>;
  streamChannels?: unknown;
  nodes?: Record<string, unknown>;
};

export class GraphLoadError extends Error {}

const isCompiled = (v: any): v is RunnableGraph =>
  v != null && typeof v === "object" && typeof v.stream === "function" && typeof v.getState === "function";
const isBuilder = (v: any) => v != null && typeof v === "object" && typeof v.compile === "function" && !isCompiled(v);
/** A compiled LangGraph `Pregel` (what `StateGraph.compile()` returns): it carries its builder. */
const isPregel = (v: any) =>
  isCompiled(v) &&
  (v as { builder?: unknown }).builder != null &&
  typeof (v as { builder?: unknown }).builder === "object";

/**
 * A graph export → the compiled graph to run. langchain's `createAgent` (and deepagents'
 * `createDeepAgent`) return a `ReactAgent` that looks like a compiled graph but keeps its state in
 * private fields, so the server runs the `Pregel` it exposes as `.graph` instead, as the LangGraph
 * server does.
 */
export async function toCompiled(value: unknown, where: string): Promise<RunnableGraph> {
  let v: any = await value;
  if (isBuilder(v)) v = v.compile();
  const inner = v?.graph;
  if (inner !== v && isPregel(inner)) v = inner;
  if (!isCompiled(v))
    throw new GraphLoadError(
      `${where} is not a LangGraph graph (expected a compiled graph, a StateGraph, or a function returning one)`,
    );
  return v;
}

/** One graph of the project: the module export, possibly a factory called per run. */
export class LoadedGraph {
  private readonly variants = new WeakMap<object, RunnableGraph>();
  private stateless: RunnableGraph | null = null;

  constructor(
    readonly graphId: string,
    readonly description: string | null,
    private readonly compiled: RunnableGraph | null,
    private readonly factory: ((config: unknown) => unknown) | null,
    private readonly where: string,
  ) {}

  /**
   * The graph for one run. The server decides persistence: the project's checkpointer for thread
   * runs, none for stateless ones, whatever the graph was compiled with. A variant shares
   * everything with the compiled graph except `checkpointer` (prototype delegation, no rebuild).
   */
  async get(config: Record<string, unknown>, checkpointer: BaseCheckpointSaver | null): Promise<RunnableGraph> {
    const base = this.compiled ?? (await toCompiled(this.factory!(config), `${this.where} (factory result)`));
    if (this.compiled) {
      if (checkpointer === null) return (this.stateless ??= withCheckpointer(base, undefined));
      let v = this.variants.get(checkpointer);
      if (!v) this.variants.set(checkpointer, (v = withCheckpointer(base, checkpointer)));
      return v;
    }
    return withCheckpointer(base, checkpointer ?? undefined);
  }
}

function withCheckpointer(graph: RunnableGraph, checkpointer: BaseCheckpointSaver | undefined): RunnableGraph {
  const variant = Object.create(graph) as RunnableGraph;
  Object.defineProperty(variant, "checkpointer", {
    value: checkpointer,
    writable: true,
    enumerable: true,
    configurable: true,
  });
  return variant;
}

/** Why a graph did not load: its module (relative to the project) and the error. */
export interface GraphFailure {
  module: string;
  error: string;
}

/** The graphs of a project that loaded, and why the others did not (by graph id). */
export interface LoadedGraphs {
  graphs: Map<string, LoadedGraph>;
  failures: Map<string, GraphFailure>;
}

/** A module export → a loaded graph (a factory is kept and called per run). */
async function fromExport(
  graphId: string,
  description: string | null,
  value: unknown,
  where: string,
): Promise<LoadedGraph> {
  if (typeof value === "function" && !isCompiled(value) && !isBuilder(value))
    return new LoadedGraph(graphId, description, null, value as (c: unknown) => unknown, where);
  return new LoadedGraph(graphId, description, await toCompiled(value, where), null, where);
}

/**
 * Imports every graph of the project at start. A graph whose module throws (or exports no graph)
 * is reported with its file and the reason and left out: the other graphs still serve.
 */
export async function loadGraphs(project: AgentProject): Promise<LoadedGraphs> {
  const graphs = new Map<string, LoadedGraph>();
  const failures = new Map<string, GraphFailure>();
  for (const g of project.graphs) {
    if (g.runtime !== "js") continue;
    const where = `graph "${g.graphId}" (${g.file}:${g.exportName})`;
    try {
      const mod = (await import(pathToFileURL(g.file).href)) as Record<string, unknown>;
      const value = mod[g.exportName];
      if (value === undefined)
        throw new GraphLoadError(
          `the module has no export "${g.exportName}" (exports: ${Object.keys(mod).join(", ") || "none"})`,
        );
      graphs.set(g.graphId, await fromExport(g.graphId, g.description, value, where));
    } catch (err) {
      const module = `./${path.relative(project.dir, g.file).split(path.sep).join("/")}:${g.exportName}`;
      failures.set(g.graphId, { module, error: err instanceof Error ? `${err.name}: ${err.message}` : String(err) });
    }
  }
  return { graphs, failures };
}
