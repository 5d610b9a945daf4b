import { sql, type RawBuilder } from "kysely";
import type { Dialect } from "../../store/database.ts";
import type { AuthFilters } from "../auth/custom-auth.ts";

/** One condition on a JSON text column: the value at a top-level key equals, or (array) contains. */
export interface JsonCond {
  key: string;
  op: "eq" | "contains";
  value: unknown;
}

/** A request's `metadata`/`values` filter: every top-level key must match. */
export function equalityConds(filter: Record<string, unknown> | null | undefined): JsonCond[] {
  return Object.entries(filter ?? {}).map(([key, value]) => ({ key, op: "eq" as const, value }));
}

/** An authorization handler's filter: `{k: v}`, `{k: {$eq: v}}`, `{k: {$contains: v | v[]}}`. */
export function authConds(filters: AuthFilters): JsonCond[] {
  const out: JsonCond[] = [];
  for (const [key, cond] of Object.entries(filters ?? {})) {
    if (cond !== null && typeof cond === "object" && !Array.isArray(cond) && ("$eq" in cond || "$contains" in cond)) {
      const c = cond as { $eq?: unknown; $contains?: unknown };
      if ("$eq" in c) out.push({ key, op: "eq", value: c.$eq });
      if ("$contains" in c)
        out.push({ key, op: "contains", value: Array.isArray(c.$contains) ? c.$contains : [c.$contains] });
    } else out.push({ key, op: "eq", value: cond });
  }
  return out;
}

const sqlitePath = (key: string) => `$."${key.replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`;

/**
 * SQL for the conditions on a JSON text column. PostgreSQL uses jsonb containment (`@>`, the real
 * server's semantics for metadata filters); SQLite uses `json_extract`/`json_each`.
 */
export function jsonCondsSql(dialect: Dialect, column: string, conds: JsonCond[]): RawBuilder<boolean>[] {
  const col = sql.ref(column);
  return conds.map((c) => {
    if (dialect === "postgres") {
      if (c.op === "eq") return sql<boolean>`(${col})::jsonb @> ${JSON.stringify({ [c.key]: c.value })}::jsonb`;
      return sql<boolean>`(jsonb_typeof((${col})::jsonb -> ${c.key}) = 'array' and ((${col})::jsonb -> ${c.key}) @> ${JSON.stringify(c.value)}::jsonb)`;
    }
    const p = sqlitePath(c.key);
    if (c.op === "contains") {
      const values = c.value as unknown[];
      const parts = values.map((v) =>
        typeof v === "object" && v !== null
          ? sql<boolean>`exists (select 1 from json_each(${col}, ${p}) where json_each.value = json(${JSON.stringify(v)}))`
          : sql<boolean>`exists (select 1 from json_each(${col}, ${p}) where json_each.value = ${typeof v === "boolean" ? Number(v) : v} and json_each.type = ${sqliteType(v)})`,
      );
      return sql<boolean>`(json_type(${col}, ${p}) = 'array'${parts.length ? sql` and ${sql.join(parts, sql` and `)}` : sql``})`;
    }
    const v = c.value;
    if (v === null) return sql<boolean>`json_type(${col}, ${p}) = 'null'`;
    if (typeof v === "boolean") return sql<boolean>`json_type(${col}, ${p}) = ${v ? "true" : "false"}`;
    if (typeof v === "object") return sql<boolean>`json_extract(${col}, ${p}) = json(${JSON.stringify(v)})`;
    return sql<boolean>`(json_extract(${col}, ${p}) = ${v} and json_type(${col}, ${p}) = ${sqliteType(v)})`;
  });
}

function sqliteType(v: unknown): string {
  if (typeof v === "string") return "text";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "real";
  if (typeof v === "boolean") return v ? "true" : "false";
  return "null";
}
