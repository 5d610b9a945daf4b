import type { BaseStore, Item, Operation } from "@langchain/langgraph";

/** A store operation as the Python worker sends it (`wharf_worker/store.py` `op_to_json`). */
export type PythonStoreOp =
  | { kind: "get"; namespace: string[]; key: string }
  | { kind: "put"; namespace: string[]; key: string; value: Record<string, unknown> | null; index: false | string[] | null }
  | { kind: "search"; namespace_prefix: string[]; filter: Record<string, unknown> | null; limit: number; offset: number; query: string | null }
  | { kind: "list"; match_conditions: Array<{ match_type: "prefix" | "suffix"; path: string[] }>; max_depth: number | null; limit: number; offset: number };

/** Python's operation → LangGraph JS's (pure: table-tested). */
export function toJsOperation(op: PythonStoreOp): Operation {
  switch (op.kind) {
    case "get":
      return { namespace: op.namespace, key: op.key };
    case "put":
      return { namespace: op.namespace, key: op.key, value: op.value, ...(op.index !== null ? { index: op.index } : {}) };
    case "search":
      return { namespacePrefix: op.namespace_prefix, filter: op.filter ?? undefined, limit: op.limit, offset: op.offset, query: op.query ?? undefined };
    case "list":
      return { matchConditions: op.match_conditions.map((c) => ({ matchType: c.match_type, path: c.path })), maxDepth: op.max_depth ?? undefined, limit: op.limit, offset: op.offset };
    default:
      throw new Error(`unknown store operation ${JSON.stringify((op as { kind?: unknown }).kind)}`);
  }
}

const itemToPython = (i: (Item & { score?: number }) | null) =>
  i && { namespace: i.namespace, key: i.key, value: i.value, created_at: new Date(i.createdAt).toISOString(), updated_at: new Date(i.updatedAt).toISOString(), ...(i.score !== undefined ? { score: i.score } : {}) };

/** A JS result → what `result_from_json` in the worker revives (pure). */
export function toPythonResult(op: PythonStoreOp, result: unknown): unknown {
  if (op.kind === "get") return itemToPython(result as Item | null);
  if (op.kind === "search") return (result as Item[]).map(itemToPython);
  if (op.kind === "list") return result;
  return null;
}

/** Serves a Python graph's store batch from the server's store. */
export async function pythonStoreBatch(store: BaseStore, ops: PythonStoreOp[]): Promise<unknown[]> {
  const results = await store.batch(ops.map(toJsOperation));
  return ops.map((op, i) => toPythonResult(op, results[i]));
}
