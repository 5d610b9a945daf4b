import type SQLite from "better-sqlite3";
import type { SqliteDatabase } from "kysely";

/**
 * Kysely's SQLite driver prepares every query anew; preparing cost as much as running the query
 * itself on the agent server's request path. Statements are kept per SQL text (least recently used
 * out past `max`: `IN (…)` lists of varying length make new texts). better-sqlite3 runs a statement
 * synchronously, so one statement serves every caller, except while one iterates it (`busy`): then
 * that caller gets a fresh one. SQLite re-prepares a kept statement itself after a schema change.
 */
export function withStatementCache(raw: SQLite.Database, max = 500): SqliteDatabase {
  const cache = new Map<string, SQLite.Statement>();
  return {
    close: () => raw.close(),
    prepare(text: string) {
      const kept = cache.get(text);
      if (kept && !kept.busy) {
        // Most recently used goes last, so the first key is the one to drop.
        cache.delete(text);
        cache.set(text, kept);
        return kept;
      }
      const stmt = raw.prepare(text);
      if (kept) return stmt;
      cache.set(text, stmt);
      if (cache.size > max) cache.delete(cache.keys().next().value as string);
      return stmt;
    },
  };
}
