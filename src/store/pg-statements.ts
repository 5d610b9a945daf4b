import type pg from "pg";
import { statementName } from "./prepared-query.ts";

/**
 * Runs the prepared queries' SQL texts (prepared-query.ts) on a pool's client as named statements:
 * PostgreSQL parses and plans each once per connection instead of on every execution. Other texts
 * (built anew, `in` lists of any length) stay unnamed, so a connection keeps a bounded set.
 */
export function nameStatements(client: pg.PoolClient): void {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as { query: unknown }).query = (...args: unknown[]) => {
    const [text, values] = args;
    const name =
      args.length === 2 && typeof text === "string" && Array.isArray(values) ? statementName(text) : undefined;
    return name ? query({ name, text, values }) : query(...args);
  };
}
