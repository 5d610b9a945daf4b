/** Per-graph default `config` and `context` of the default assistants (by graph id). */
export type GraphConfigs = Record<string, { config: Record<string, unknown>; context: Record<string, unknown> }>;

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === "object" && !Array.isArray(v);

/**
 * `LANGGRAPH_CONFIG` as the LangGraph server reads it: JSON `{graph_id: {...config, context}}`;
 * `context` is the assistant's context, the rest its config. A malformed value stops the start
 * with the variable's name (pure: table-tested).
 */
export function graphConfigFromEnv(raw: string | undefined): GraphConfigs {
  if (!raw?.trim()) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch (err) {
    throw new Error(`LANGGRAPH_CONFIG is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
  if (!isObject(parsed)) throw new Error("LANGGRAPH_CONFIG must be a JSON object keyed by graph id");
  const out: GraphConfigs = {};
  for (const [graphId, entry] of Object.entries(parsed)) {
    if (!isObject(entry)) throw new Error(`LANGGRAPH_CONFIG["${graphId}"] must be an object`);
    const { context, ...config } = entry;
    if (context !== undefined && !isObject(context))
      throw new Error(`LANGGRAPH_CONFIG["${graphId}"].context must be an object`);
    out[graphId] = { config, context: context ?? {} };
  }
  return out;
}
