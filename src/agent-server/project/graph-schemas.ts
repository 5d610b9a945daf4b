import { getJsonSchemaFromSchema } from "@langchain/langgraph";
import { getConfigTypeSchema, getInputTypeSchema, getOutputTypeSchema, getStateTypeSchema } from "@langchain/langgraph/zod/schema";
import type { RunnableGraph } from "./graphs.ts";

/** A schema function of LangGraph that may throw on an exotic definition: null then. */
function attempt(fn: () => unknown): unknown {
  try {
    return fn() ?? null;
  } catch {
    return null; // an unconvertible definition: the next source (or the channel list) answers
  }
}

/**
 * JSON schemas of a graph's state, input, output, config and context, from LangGraph's own
 * extraction (`@langchain/langgraph/zod/schema`, as the LangGraph server uses): zod state with its
 * registry metadata (`jsonSchemaExtra`), `StateSchema`, and Standard Schema definitions. For
 * Annotation-based state (no runtime schema) the channel names are listed, so none is null.
 */
export function graphSchemas(graph: RunnableGraph): Record<string, unknown> {
  const builder = graph.builder as Record<string, unknown> | undefined;
  const channelsSchema = () => {
    const keys = Object.keys(graph.channels ?? {}).filter((k) => !k.startsWith("__") && !k.startsWith("branch:"));
    return { type: "object", properties: Object.fromEntries(keys.map((k) => [k, {}])) };
  };
  const plain = (def: unknown) => (def ? attempt(() => getJsonSchemaFromSchema(def as never)) : null);
  const state = attempt(() => getStateTypeSchema(graph)) ?? plain(builder?._schemaRuntimeDefinition) ?? channelsSchema();
  const config = attempt(() => getConfigTypeSchema(graph)) ?? plain(builder?._configRuntimeSchema);
  return {
    input_schema: attempt(() => getInputTypeSchema(graph)) ?? plain(builder?._inputRuntimeDefinition) ?? state,
    output_schema: attempt(() => getOutputTypeSchema(graph)) ?? plain(builder?._outputRuntimeDefinition) ?? state,
    state_schema: state,
    // The run's `config.configurable` and its `context` share one runtime schema in LangGraph JS.
    config_schema: config ?? null,
    context_schema: config ?? null,
  };
}
