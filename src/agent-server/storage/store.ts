import { sql } from "kysely";
import {
  BaseStore,
  type Item,
  type ListNamespacesOperation,
  type Operation,
  type OperationResults,
  type PutOperation,
  type SearchOperation,
} from "@langchain/langgraph";
import { nowIso, type Dialect } from "../../store/database.ts";
import type { Kysely } from "kysely";
import type { Database } from "../../store/schema.ts";
import { parseJson } from "./json-columns.ts";
import { cosine, fieldTexts, type StoreIndex } from "./store-index.ts";
import { jsonCondsSql, type JsonCond } from "./json-filter.ts";
import type { AgentStoreItemsTable } from "./tables.ts";

/** A namespace that breaks the store's rules (the routes answer it as a 422). */
export class InvalidNamespace extends Error {}

/**
 * Labels are non-empty strings without "." (the stored separator) or ":" (LangGraph's `BaseStore`
 * refuses it); `langgraph` is a reserved root for writes.
 */
export function checkNamespace(
  namespace: unknown,
  opts: { allowEmpty?: boolean; allowWildcard?: boolean; reservedRoot?: boolean } = {},
): string[] {
  if (!Array.isArray(namespace)) throw new InvalidNamespace("Namespace must be a list of labels");
  if (namespace.length === 0 && !opts.allowEmpty) throw new InvalidNamespace("Namespace is required");
  for (const label of namespace) {
    if (typeof label !== "string" || !label || label.includes(".") || label.includes(":") || label.includes("\0")) {
      throw new InvalidNamespace(
        `Namespace labels cannot be empty or contain periods or colons. Received: ${namespace.join(".")}`,
      );
    }
    if (label === "*" && !opts.allowWildcard)
      throw new InvalidNamespace(
        `Namespace label "*" is only allowed in list conditions. Received: ${namespace.join(".")}`,
      );
  }
  if (opts.reservedRoot && namespace[0] === "langgraph")
    throw new InvalidNamespace(`Root label for namespace cannot be "langgraph". Got: ${namespace.join(".")}`);
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
    } else if (
      cond !== null &&
      typeof cond === "object" &&
      !Array.isArray(cond) &&
      Object.keys(cond).length > 0 &&
      Object.keys(cond).every((k) => OPS.has(k))
    ) {
      for (const [op, v] of Object.entries(cond)) out.push({ key, op: op as Op, value: v });
    } else out.push({ key, op: "$eq", value: cond });
  }
  return out;
}

const same = (a: unknown, b: unknown) =>
  a === b ||
  (typeof a === "object" &&
    typeof b === "object" &&
    a !== null &&
    b !== null &&
    JSON.stringify(a) === JSON.stringify(b));

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
const inSql = (c: Cond) =>
  c.op === "$eq" && (c.value === null || ["string", "number", "boolean"].includes(typeof c.value));

function matchesPath(path: string[], ns: string[], from: "prefix" | "suffix"): boolean {
  if (path.length > ns.length) return false;
  const offset = from === "prefix" ? 0 : ns.length - path.length;
  return path.every((p, i) => p === "*" || p === ns[offset + i]);
}

function toItem(row: AgentStoreItemsTable): Item {
  return {
    namespace: row.namespace.split("."),
    key: row.key,
    value: parseJson(row.value, {}),
    createdAt: new Date(row.created_at),
    updatedAt: new Date(row.updated_at),
  };
}

export interface AgentStoreOptions {
  /** `store.index`: semantic search over embeddings of the indexed fields. */
  index?: StoreIndex | null;
  /** `store.ttl`: default TTL (minutes) and whether reads refresh it. */
  ttl?: { defaultTtlMinutes: number | null; refreshOnRead: boolean } | null;
}

const notExpired = (now: string) => (eb: any) => eb.or([eb("expires_at", "is", null), eb("expires_at", ">", now)]);
const expiryOf = (minutes: number | null, from = Date.now()) =>
  minutes ? new Date(from + minutes * 60_000).toISOString() : null;

/**
 * The LangGraph store kept in the platform database, scoped by server. One implementation serves
 * the `/store/*` routes and the graphs (`config.store`, `getStore()` in nodes). Namespaces are
 * stored as their labels joined with "."; a prefix search is a string-prefix match on that.
 * With `store.index`, a search `query` ranks items by cosine similarity of their fields'
 * embeddings (a scan over the prefix's items); with `store.ttl`, items expire.
 */
export class AgentStore extends BaseStore {
  constructor(
    private readonly db: Kysely<Database>,
    private readonly dialect: Dialect,
    private readonly serverId: string,
    private readonly options: AgentStoreOptions = {},
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

  /** A put with a TTL in minutes (`PUT /store/items` `ttl`; undefined = the project's default). */
  async putItem(
    namespace: string[],
    key: string,
    value: Record<string, unknown>,
    index: false | string[] | undefined | null,
    ttlMinutes: number | null | undefined,
  ): Promise<void> {
    await this.putOp({ namespace, key, value, index: index ?? undefined }, ttlMinutes);
  }

  /** Reads an item; `refreshTtl` (default: the project's `refresh_on_read`) pushes its expiry back. */
  async getItem(namespace: string[], key: string, refreshTtl?: boolean | null): Promise<Item | null> {
    return this.getOp(namespace, key, refreshTtl);
  }

  /** Deletes expired items (the `store.ttl` sweep); returns how many. */
  async sweepExpired(now = nowIso()): Promise<number> {
    const expired = await this.db
      .selectFrom("agent_store_items")
      .select(["namespace", "key"])
      .where("server_id", "=", this.serverId)
      .where("expires_at", "<=", now)
      .execute();
    for (const r of expired) {
      await this.db
        .deleteFrom("agent_store_vectors")
        .where("server_id", "=", this.serverId)
        .where("namespace", "=", r.namespace)
        .where("key", "=", r.key)
        .execute();
      await this.db
        .deleteFrom("agent_store_items")
        .where("server_id", "=", this.serverId)
        .where("namespace", "=", r.namespace)
        .where("key", "=", r.key)
        .where("expires_at", "<=", now)
        .execute();
    }
    return expired.length;
  }

  private async getOp(namespace: string[], key: string, refreshTtl?: boolean | null): Promise<Item | null> {
    const now = nowIso();
    const ns = checkNamespace(namespace).join(".");
    const row = await this.db
      .selectFrom("agent_store_items")
      .selectAll()
      .where("server_id", "=", this.serverId)
      .where("namespace", "=", ns)
      .where("key", "=", key)
      .where(notExpired(now))
      .executeTakeFirst();
    if (!row) return null;
    if (row.ttl_minutes && (refreshTtl ?? this.options.ttl?.refreshOnRead ?? true)) {
      await this.db
        .updateTable("agent_store_items")
        .set({ expires_at: expiryOf(row.ttl_minutes) })
        .where("server_id", "=", this.serverId)
        .where("namespace", "=", ns)
        .where("key", "=", key)
        .execute();
    }
    return toItem(row);
  }

  private async putOp(op: PutOperation, ttlMinutes?: number | null): Promise<void> {
    const namespace = checkNamespace(op.namespace, { reservedRoot: op.value !== null }).join(".");
    const scope = this.db
      .deleteFrom("agent_store_items")
      .where("server_id", "=", this.serverId)
      .where("namespace", "=", namespace)
      .where("key", "=", op.key);
    const vectors = this.db
      .deleteFrom("agent_store_vectors")
      .where("server_id", "=", this.serverId)
      .where("namespace", "=", namespace)
      .where("key", "=", op.key);
    if (op.value === null) {
      await scope.execute();
      await vectors.execute();
      return;
    }
    const now = nowIso();
    const value = JSON.stringify(op.value);
    const ttl = ttlMinutes === undefined ? (this.options.ttl?.defaultTtlMinutes ?? null) : ttlMinutes;
    const expires_at = expiryOf(ttl);
    // Embeddings first: a failing embed function fails the put before anything is written.
    const embedded = await this.embedFields(op);
    await this.db
      .insertInto("agent_store_items")
      .values({
        server_id: this.serverId,
        namespace,
        key: op.key,
        value,
        created_at: now,
        updated_at: now,
        expires_at,
        ttl_minutes: ttl,
      })
      .onConflict((oc) =>
        oc
          .columns(["server_id", "namespace", "key"])
          .doUpdateSet({ value, updated_at: now, expires_at, ttl_minutes: ttl }),
      )
      .execute();
    if (!this.options.index) return;
    await vectors.execute();
    if (embedded.length) {
      await this.db
        .insertInto("agent_store_vectors")
        .values(
          embedded.map((e) => ({
            server_id: this.serverId,
            namespace,
            key: op.key,
            field: e.field,
            embedding: JSON.stringify(e.vector),
          })),
        )
        .execute();
    }
  }

  /** The embeddings of an item's indexed fields (`index: false` opts out; a list overrides the fields). */
  private async embedFields(op: PutOperation): Promise<Array<{ field: string; vector: number[] }>> {
    const index = this.options.index;
    if (!index || op.index === false || op.value === null) return [];
    const fields = Array.isArray(op.index) ? op.index : index.fields;
    const texts: Array<{ field: string; text: string }> = [];
    for (const f of fields) fieldTexts(op.value, f).forEach((text, i) => texts.push({ field: `${f}#${i}`, text }));
    if (!texts.length) return [];
    const vectors = await index.embed(texts.map((t) => t.text));
    return texts.map((t, i) => ({ field: t.field, vector: vectors[i] ?? [] }));
  }

  private async searchOp(op: SearchOperation): Promise<Array<Item & { score?: number }>> {
    const prefix = checkNamespace(op.namespacePrefix, { allowEmpty: true }).join(".");
    const conds = filterConds(op.filter);
    const sqlConds: JsonCond[] = conds.filter(inSql).map((c) => ({ key: c.key, op: "eq", value: c.value }));
    const rest = conds.filter((c) => !inSql(c));
    const limit = op.limit ?? 10;
    const offset = op.offset ?? 0;
    let q = this.db
      .selectFrom("agent_store_items")
      .selectAll()
      .where("server_id", "=", this.serverId)
      .where(notExpired(nowIso()));
    if (prefix)
      q = q.where((eb) =>
        eb.or([
          eb("namespace", "=", prefix),
          eb(sql<string>`substr(namespace, 1, ${prefix.length + 1})`, "=", `${prefix}.`),
        ]),
      );
    for (const cond of jsonCondsSql(this.dialect, "value", sqlConds)) q = q.where(cond);
    q = q.orderBy("updated_at", "desc").orderBy("namespace").orderBy("key");
    const semantic = this.options.index && op.query;
    if (rest.length === 0 && !semantic) return (await q.limit(limit).offset(offset).execute()).map(toItem);
    // Operators SQL cannot express the same way on both dialects: filtered here, after the scalar ones.
    const rows = (await q.execute()).filter((r) => rest.every((c) => matches(parseJson(r.value, {}), c)));
    if (!semantic) return rows.map(toItem).slice(offset, offset + limit);
    return (await this.rank(rows, op.query!)).slice(offset, offset + limit);
  }

  /** Items ranked by their best field's cosine similarity to the query; unindexed items last. */
  private async rank(rows: AgentStoreItemsTable[], query: string): Promise<Array<Item & { score?: number }>> {
    const [qv] = await this.options.index!.embed([query]);
    const best = new Map<string, number>();
    const keyOf = (ns: string, key: string) => `${ns}\u0000${key}`;
    const namespaces = [...new Set(rows.map((r) => r.namespace))];
    for (let i = 0; i < namespaces.length; i += 500) {
      const vectors = await this.db
        .selectFrom("agent_store_vectors")
        .selectAll()
        .where("server_id", "=", this.serverId)
        .where("namespace", "in", namespaces.slice(i, i + 500))
        .execute();
      for (const v of vectors) {
        const score = cosine(qv, JSON.parse(v.embedding) as number[]);
        const k = keyOf(v.namespace, v.key);
        if (!best.has(k) || score > best.get(k)!) best.set(k, score);
      }
    }
    return rows
      .map((r) => ({ ...toItem(r), score: best.get(keyOf(r.namespace, r.key)) }))
      .sort((a, b) => (b.score ?? -Infinity) - (a.score ?? -Infinity));
  }
  private async listOp(op: ListNamespacesOperation): Promise<string[][]> {
    let q = this.db
      .selectFrom("agent_store_items")
      .select("namespace")
      .distinct()
      .where("server_id", "=", this.serverId)
      .where(notExpired(nowIso()));
    const fixed = op.matchConditions?.find((c) => c.matchType === "prefix" && !c.path.includes("*"));
    if (fixed)
      q = q.where(sql<string>`substr(namespace, 1, ${fixed.path.join(".").length + 1})`, "in", [
        `${fixed.path.join(".")}.`,
        fixed.path.join("."),
      ]);
    const rows = await q.execute();
    let namespaces = rows.map((r) => r.namespace.split("."));
    for (const c of op.matchConditions ?? [])
      namespaces = namespaces.filter((ns) => matchesPath(c.path, ns, c.matchType));
    if (op.maxDepth !== undefined && op.maxDepth !== null)
      namespaces = [...new Set(namespaces.map((ns) => ns.slice(0, op.maxDepth).join(".")))].map((s) => s.split("."));
    namespaces.sort((a, b) => (a.join(".") < b.join(".") ? -1 : a.join(".") > b.join(".") ? 1 : 0));
    return namespaces.slice(op.offset ?? 0, (op.offset ?? 0) + (op.limit ?? 100));
  }
}
