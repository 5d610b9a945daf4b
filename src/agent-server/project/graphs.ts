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
  getGraphAsync(config: Record<string, unknown>): Promise<{ toJSON(): unknown }>;
  getSubgraphsAsync?(namespace?: string, recurse?: boolean): AsyncIterable<[string, RunnableGraph]>;
  checkpointer?: unknown;
  builder?: unknown;
  channels?: Record<string, unknown>;
  streamChannels?: unknown;
  nodes?: Record<string, unknown>;
};

export class GraphLoadError extends Error {}

const isCompiled = (v: any): v is RunnableGraph => v != null && typeof v === "object" && typeof v.stream === "function" && typeof v.getState === "function";
const isBuilder = (v: any) => v != null && typeof v === "object" && typeof v.compile === "function" && !isCompiled(v);

async function toCompiled(value: unknown, where: string): Promise<RunnableGraph> {
  let v: any = await value;
  if (isBuilder(v)) v = v.compile();
  if (!isCompiled(v) && isCompiled(v?.graph)) v = v.graph; // createAgent()-style wrappers
  if (!isCompiled(v)) throw new GraphLoadError(`${where} is not a LangGraph graph (expected a compiled graph, a StateGraph, or a function returning one)`);
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
  Object.defineProperty(variant, "checkpointer", { value: checkpointer, writable: true, enumerable: true, configurable: true });
  return variant;
}

/** Imports every graph of the project at start; a failure names the graph, the file and why. */
export async function loadGraphs(project: AgentProject): Promise<Map<string, LoadedGraph>> {
  const out = new Map<string, LoadedGraph>();
  for (const g of project.graphs) {
    const where = `graph "${g.graphId}" (${g.file}:${g.exportName})`;
    let mod: Record<string, unknown>;
    try {
      mod = (await import(pathToFileURL(g.file).href)) as Record<string, unknown>;
    } catch (err) {
      throw new GraphLoadError(`cannot load ${where}: ${(err as Error).message}`);
    }
    const value = mod[g.exportName];
    if (value === undefined) throw new GraphLoadError(`cannot load ${where}: the module has no export "${g.exportName}" (exports: ${Object.keys(mod).join(", ") || "none"})`);
    if (typeof value === "function" && !isCompiled(value) && !isBuilder(value)) {
      out.set(g.graphId, new LoadedGraph(g.graphId, g.description, null, value as (c: unknown) => unknown, where));
    } else {
      try {
        out.set(g.graphId, new LoadedGraph(g.graphId, g.description, await toCompiled(value, where), null, where));
      } catch (err) {
        throw new GraphLoadError(`cannot load ${where}: ${(err as Error).message}`);
      }
    }
  }
  return out;
}
