import { createHash } from "node:crypto";
import type { Compilable, CompiledQuery, Kysely, QueryResult } from "kysely";

/** PostgreSQL statement names of the prepared queries' SQL texts (see pg-statements.ts). */
const statementNames = new Map<string, string>();

/** The statement name of a prepared query's SQL text; undefined for any other text. */
export function statementName(sqlText: string): string | undefined {
  return statementNames.get(sqlText);
}

const MARK = "\u0000wharf-arg:";

/** Where each of a compiled query's parameters comes from: an argument, or a constant of the query. */
type Slot = { arg: string } | { value: unknown };

/** Placeholders standing for the arguments while the query is built (the marks are found in its parameters). */
const placeholders = new Proxy({}, { get: (_t, name) => `${MARK}${String(name)}` });

/**
 * A query built with Kysely and compiled once per database, then executed with each call's values:
 * building and compiling a short query cost more than SQLite's own execution of it on the agent
 * server's run path. `build` puts `p.<name>` where an argument goes; an argument cannot be a value
 * Kysely would expand (an `in` list) nor one it inspects while building. On PostgreSQL the query
 * runs as a named prepared statement, parsed and planned once per connection, so it names its
 * columns (`select *` would break a prepared statement when a migration adds one).
 */
export function preparedQuery<A extends object, DB, R>(
  build: (db: Kysely<DB>, p: A) => Compilable<R>,
): (db: Kysely<DB>, args: A) => Promise<QueryResult<R>> {
  const compiled = new WeakMap<Kysely<DB>, { query: CompiledQuery<R>; slots: Slot[] }>();
  return (db, args) => {
    let c = compiled.get(db);
    if (!c) compiled.set(db, (c = compile(build(db, placeholders as A))));
    const parameters = c.slots.map((s) => ("arg" in s ? (args as Record<string, unknown>)[s.arg] : s.value));
    return db.executeQuery<R>({ ...c.query, parameters });
  };
}

function compile<R>(q: Compilable<R>): { query: CompiledQuery<R>; slots: Slot[] } {
  const query = q.compile();
  const slots = query.parameters.map((v): Slot =>
    typeof v === "string" && v.startsWith(MARK) ? { arg: v.slice(MARK.length) } : { value: v },
  );
  if (!statementNames.has(query.sql))
    statementNames.set(query.sql, `wharf_${createHash("sha256").update(query.sql).digest("hex").slice(0, 24)}`);
  return { query, slots };
}
