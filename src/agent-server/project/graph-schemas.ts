import type { RunnableGraph } from "./graphs.ts";
import { runtimeSchema } from "./runtime-schemas.ts";
import type { StaticGraphSchema, StaticSchemas } from "./static-schemas.ts";

/** The `/assistants/{id}/schemas` answer's schema fields. */
export interface GraphSchemasAnswer {
  input_schema: unknown;
  output_schema: unknown;
  state_schema: unknown;
  config_schema: unknown;
  context_schema: unknown;
}

/** Whether answering this graph's schemas needs its TypeScript types (no runtime schema, or a factory that needs a run's config). */
export async function needsStaticSchemas(
  graph: () => Promise<RunnableGraph>,
  graphFile: string | null,
): Promise<boolean> {
  try {
    return (await runtimeSchema(await graph(), graphFile)) === undefined;
  } catch {
    return true; // a factory that cannot build without a thread's config: its types may still answer
  }
}

/** The static result's entry for the root graph or one of its subgraphs (pure). */
export function pickStatic(all: StaticSchemas | null, namespace?: string): StaticGraphSchema | undefined {
  if (!all) return undefined;
  const root = Object.keys(all).find((k) => !k.includes("|"));
  if (!root) return undefined;
  return (namespace ? all[`${root}|${namespace}`] : undefined) ?? all[root];
}

/** Last resort, so no schema is null: the state's channel names, each of any type (pure). */
export function channelsSchema(graph: Pick<RunnableGraph, "channels">): Record<string, unknown> {
  const keys = Object.keys(graph.channels ?? {}).filter((k) => !k.startsWith("__") && !k.startsWith("branch:"));
  return { type: "object", properties: Object.fromEntries(keys.map((k) => [k, {}])) };
}

/** One schema set in the API's shape: JS has one runtime schema for `configurable` and `context` (pure). */
export function toAnswer(
  s: StaticGraphSchema | undefined,
  fallback: () => Record<string, unknown>,
): GraphSchemasAnswer {
  const state = s?.state ?? fallback();
  return {
    input_schema: s?.input ?? state,
    output_schema: s?.output ?? state,
    state_schema: state,
    config_schema: s?.config ?? null,
    context_schema: s?.config ?? null,
  };
}

/** Where a graph's schemas come from besides the graph object: its module file and its TypeScript-derived schemas. */
export interface SchemaSources {
  file: string | null;
  static: () => Promise<StaticSchemas | null> | StaticSchemas | null;
}

/**
 * A graph's state, input, output and config schemas, in the LangGraph server's order: the runtime
 * definitions (StateSchema, zod with `withLangGraph` registry metadata, plain zod), else the
 * schemas derived from the graph's TypeScript types (`sources.static`, for a subgraph its
 * `namespace` entry), else the channel list as the state.
 */
export async function resolveSchema(
  graph: RunnableGraph,
  sources: SchemaSources,
  namespace?: string,
): Promise<StaticGraphSchema> {
  const s = (await runtimeSchema(graph, sources.file)) ?? pickStatic(await sources.static(), namespace);
  return s?.state || s?.input || s?.output ? s : { ...s, state: channelsSchema(graph) };
}

/** The `/assistants/{id}/schemas` answer of a graph (see resolveSchema). */
export async function graphSchemas(graph: RunnableGraph, sources: SchemaSources): Promise<GraphSchemasAnswer> {
  return toAnswer(await resolveSchema(graph, sources), () => channelsSchema(graph));
}
