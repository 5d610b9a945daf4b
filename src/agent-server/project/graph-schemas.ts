import { getJsonSchemaFromSchema } from "@langchain/langgraph";
import type { RunnableGraph } from "./graphs.ts";

function schemaOf(value: unknown): unknown {
  if (!value) return null;
  try {
    return getJsonSchemaFromSchema(value as never) ?? null;
  } catch {
    return null;
  }
}

/**
 * JSON schemas of a graph's state, input, output, config and context. Graphs built from zod or
 * Standard Schema state convert exactly; for Annotation-based state the channel names are listed.
 */
export function graphSchemas(graph: RunnableGraph): Record<string, unknown> {
  const builder = graph.builder as Record<string, unknown> | undefined;
  const channelsSchema = () => {
    const keys = Object.keys(graph.channels ?? {}).filter((k) => !k.startsWith("__") && !k.startsWith("branch:"));
    return { type: "object", properties: Object.fromEntries(keys.map((k) => [k, {}])) };
  };
  const state = schemaOf(builder?._schemaRuntimeDefinition) ?? channelsSchema();
  return {
    input_schema: schemaOf(builder?._inputRuntimeDefinition) ?? state,
    output_schema: schemaOf(builder?._outputRuntimeDefinition) ?? state,
    state_schema: state,
    config_schema: schemaOf(builder?._configRuntimeSchema) ?? null,
    context_schema: schemaOf(builder?._configRuntimeSchema) ?? null,
  };
}
