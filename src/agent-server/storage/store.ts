import { sql } from "kysely";
import { BaseStore, type Item, type ListNamespacesOperation, type Operation, type OperationResults, type PutOperation, type SearchOperation } from "@langchain/langgraph";
import { nowIso, type Dialect } from "../../store/database.ts";
import type { Kysely } from "kysely";
import type { Database } from "../../store/schema.ts";
import { parseJson } from "./json-columns.ts";
import { jsonCondsSql, type JsonCond } from "./json-filter.ts";
import type { AgentStoreItemsTable } from "./tables.ts";

/** A namespace that breaks the store's rules (the routes answer it as a 422). */
export class InvalidNamespace extends Error {}

/**
 * Labels are non-empty strings without "." (the stored separator) or ":" (LangGraph's `BaseStore`
 * refuses it); `langgraph` is a reserved root for writes.
 */
export function checkNamespace(namespace: unknown, opts: { allowEmpty?: boolean; allowWildcard?: boolean; reservedRoot?: boolean } = {}): string[] {
  if (!Array.isArray(namespace)) throw new InvalidNamespace("Namespace must be a list of labels");
  if (namespace.length === 0 && !opts.allowEmpty) throw new InvalidNamespace("Namespace is required");
  for (const label of namespace) {
    if (typeof label !== "string" || !label || label.includes(".") || label.includes(":") || label.includes("\0")) {
      throw new InvalidNamespace(`Namespace labels cannot be empty or contain periods or colons. Received: ${namespace.join(".")}`);
    }
    if (label === "*" && !opts.allowWildcard) throw new InvalidNamespace(`Namespace label "*" is only allowed in list conditions. Received: ${namespace.join(".")}`);
  }
  if (opts.reservedRoot && namespace[0] === "langgraph") throw new InvalidNamespace(`Root label for namespace cannot be "langgraph". Got: ${namespace.join(".")}`);
  return namespace as string[];
}

type Op = "$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte" | "$in" | "$nin" | "$contains";
interface Cond {
  key: string;
  op: Op;
  value: unknown;
}
const OPS = new Set<string>(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$contains"]);

/**
 * A value filter (`{k: v}` or `{k: {$op: v}}`, top-level keys, every key must match) as conditions.
 * `$and: [...]` (how the real server combines a request's filter with an auth handler's) is flattened.
 */
export function filterConds(filter: Record<string, unknown> | null | undefined): Cond[] {
  const out: Cond[] = [];
  for (const [key, cond] of Object.entries(filter ?? {})) {
    if (key === "$and" && Array.isArray(cond)) {
      for (const f of cond) out.push(...filterConds(f as Record<string, unknown>));
    } else if (cond !== null && typeof cond === "object" && !Array.isArray(cond) && Object.keys(cond).length > 0 && Object.keys(cond).every((k) => OPS.has(k))) {
      for (const [op, v] of Object.entries(cond)) out.push({ key, op: op as Op, value: v });
    } else out.push({ key, op: "$eq", value: cond });
  }
  return out;
}

const same = (a: unknown, b: unknown) => a === b || (typeof a === "object" && typeof b === "object" && a !== null && b !== null && JSON.stringify(a) === JSON.stringify(b));

function matches(value: Record<string, unknown>, c: Cond): boolean {
  const v = value[c.key];
  switch (c.op) {
    case "$eq":
      return same(v, c.value);
    case "$ne":
      return !same(v, c.value);
    case "$gt":
      return Number(v) > Number(c.value);
    case "$gte":
      return Number(v) >= Number(c.value);
    case "$lt":
      return Number(v) < Number(c.value);
    case "$lte":
      return Number(v) <= Number(c.value);
    case "$in":
      return Array.isArray(c.value) && c.value.some((x) => same(v, x));
    case "$nin":
      return !Array.isArray(c.value) || !c.value.some((x) => same(v, x));
    case "$contains": {
      const wanted = Array.isArray(c.value) ? c.value : [c.value];
      return Array.isArray(v) && wanted.every((w) => v.some((x) => same(x, w)));
    }
  }
}

/** Equality on a scalar is exact in SQL on both dialects; everything else is checked in memory. */
const inSql = (c: Cond) => c.op === "$eq" && (c.value === null || ["string", "number", "boolean"].includes(typeof c.value));

function matchesPath(path: string[], ns: string[], from: "prefix" | "suffix"): boolean {
  if (path.length > ns.length) return false;
  const offset = from === "prefix" ? 0 : ns.length - path.length;
  return path.every((p, i) => p === "*" || p === ns[offset + i]);
}

function toItem(row: AgentStoreItemsTable): Item {
  return { namespace: row.namespace.split("."), key: row.key, value: parseJson(row.value, {}), createdAt: new Date(row.created_at), updatedAt: new Date(row.updated_at) };
}

/**
 * The LangGraph store kept in the platform database, scoped by server. One implementation serves
 * the `/store/*` routes and the graphs (`config.store`, `getStore()` in nodes). Namespaces are
 * stored as their labels joined with "."; a prefix search is a string-prefix match on that.
 * Semantic search needs an index (embeddings), which this store does not have: `query` is ignored.
 */
export class AgentStore extends BaseStore {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: Dialect,
    private readonly serverId: string,
  ) {
    super();
  }

  async batch<Ops extends Operation[]>(operations: Ops): Promise<OperationResults<Ops>> {
    const out: unknown[] = [];
    for (const op of operations) {
      if ("value" in op) out.push(await this.putOp(op as PutOperation));
      else if ("namespacePrefix" in op) out.push(await this.searchOp(op as SearchOperation));
      else if ("key" in op) out.push(await this.getOp(op.namespace, op.key));
      else out.push(await this.listOp(op as ListNamespacesOperation));
    }
    return out as OperationResults<Ops>;
  }

  private async getOp(namespace: string[], key: string): Promise<Item | null> {
    const row = await this.db
      .selectFrom("agent_store_items")
      .selectAll()
      .where("server_id", "=", this.serverId)
      .where("namespace", "=", checkNamespace(namespace).join("."))
      .where("key", "=", key)
      .executeTakeFirst();
    return row ? toItem(row) : null;
  }

  private async putOp(op: PutOperation): Promise<void> {
    const namespace = checkNamespace(op.namespace, { reservedRoot: op.value !== null }).join(".");
    const scope = this.db.deleteFrom("agent_store_items").where("server_id", "=", this.serverId).where("namespace", "=", namespace).where("key", "=", op.key);
    if (op.value === null) {
      await scope.execute();
      return;
    }
    const now = nowIso();
    const value = JSON.stringify(op.value);
    await this.db
      .insertInto("agent_store_items")
      .values({ server_id: this.serverId, namespace, key: op.key, value, created_at: now, updated_at: now })
      .onConflict((oc) => oc.columns(["server_id", "namespace", "key"]).doUpdateSet({ value, updated_at: now }))
      .execute();
  }

  private async searchOp(op: SearchOperation): Promise<Array<Item & { score?: number }>> {
    const prefix = checkNamespace(op.namespacePrefix, { allowEmpty: true }).join(".");
    const conds = filterConds(op.filter);
    const sqlConds: JsonCond[] = conds.filter(inSql).map((c) => ({ key: c.key, op: "eq", value: c.value }));
    const rest = conds.filter((c) => !inSql(c));
    const limit = op.limit ?? 10;
    const offset = op.offset ?? 0;
    let q = this.db.selectFrom("agent_store_items").selectAll().where("server_id", "=", this.serverId);
    if (prefix) q = q.where((eb) => eb.or([eb("namespace", "=", prefix), eb(sql<string>`substr(namespace, 1, ${prefix.length + 1})`, "=", `${prefix}.`)]));
    for (const cond of jsonCondsSql(this.dialect, "value", sqlConds)) q = q.where(cond);
    q = q.orderBy("updated_at", "desc").orderBy("namespace").orderBy("key");
    if (rest.length === 0) return (await q.limit(limit).offset(offset).execute()).map(toItem);
    // Operators SQL cannot express the same way on both dialects: filtered here, after the scalar ones.
    const items = (await q.execute()).map(toItem).filter((it) => rest.every((c) => matches(it.value, c)));
    return items.slice(offset, offset + limit);
  }

  private async listOp(op: ListNamespacesOperation): Promise<string[][]> {
    let q = this.db.selectFrom("agent_store_items").select("namespace").distinct().where("server_id", "=", this.serverId);
    const fixed = op.matchConditions?.find((c) => c.matchType === "prefix" && !c.path.includes("*"));
    if (fixed) q = q.where(sql<string>`substr(namespace, 1, ${fixed.path.join(".").length + 1})`, "in", [`${fixed.path.join(".")}.`, fixed.path.join(".")]);
    const rows = await q.execute();
    let namespaces = rows.map((r) => r.namespace.split("."));
    for (const c of op.matchConditions ?? []) namespaces = namespaces.filter((ns) => matchesPath(c.path, ns, c.matchType));
    if (op.maxDepth !== undefined && op.maxDepth !== null) namespaces = [...new Set(namespaces.map((ns) => ns.slice(0, op.maxDepth).join(".")))].map((s) => s.split("."));
    namespaces.sort((a, b) => (a.join(".") < b.join(".") ? -1 : a.join(".") > b.join(".") ? 1 : 0));
    return namespaces.slice(op.offset ?? 0, (op.offset ?? 0) + (op.limit ?? 100));
  }
}
