import fs from "node:fs";
import path from "node:path";
import SQLite from "better-sqlite3";
import { Kysely, SqliteDialect, sql } from "kysely";
import pg from "pg";
import { redactUrl } from "../log/redact-url.ts";
import { OwnSchemaPostgresDialect } from "./own-schema-postgres.ts";
import { withStatementCache } from "./statement-cache.ts";
import { surviveClientErrors } from "./pg-client-errors.ts";
import { nameStatements } from "./pg-statements.ts";
import type { Database } from "./schema.ts";

export type Dialect = "sqlite" | "postgres";

export interface Store {
  db: Kysely<Database>;
  dialect: Dialect;
  /** Where the data lives, for messages (the SQLite file path or the PostgreSQL URL without password). */
  location: string;
  close(): Promise<void>;
  /**
   * PostgreSQL: a connection of its own, outside the pool, on the store's schema (for a session
   * that must live as long as the process, such as its presence lock). The caller ends it.
   */
  dedicatedConnection?: () => Promise<pg.Client>;
}

export class StoreError extends Error {}

export interface OpenStoreOptions {
  /** `postgres://…`, `sqlite:/path/file.db`, or null for `$home/wharf.db`. */
  databaseUrl: string | null;
  home: string;
  /** PostgreSQL schema to use (tests isolate themselves in a fresh schema). */
  pgSchema?: string;
  poolSize?: number;
}

function openSqlite(file: string): Store {
  fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o700 });
  const raw = new SQLite(file);
  // WAL + synchronous=NORMAL: a committed transaction survives the process being killed;
  // busy_timeout lets a second process (the CLI's key rotation) write without failing at once.
  raw.pragma("journal_mode = WAL");
  raw.pragma("synchronous = NORMAL");
  raw.pragma("busy_timeout = 5000");
  raw.pragma("foreign_keys = ON");
  fs.chmodSync(file, 0o600);
  const db = new Kysely<Database>({ dialect: new SqliteDialect({ database: withStatementCache(raw) }) });
  return { db, dialect: "sqlite", location: file, close: () => db.destroy() };
}

async function openPostgres(url: string, schema: string | undefined, poolSize: number): Promise<Store> {
  const pool = new pg.Pool({
    connectionString: url,
    max: poolSize,
    connectionTimeoutMillis: 5000,
    options: schema ? `-c search_path=${schema}` : undefined,
  });
  pool.on("connect", nameStatements);
  // Any connection's failure is surfaced on its next query.
  surviveClientErrors(pool);
  // Fail fast with a clear message instead of on the first request.
  try {
    const client = await pool.connect();
    if (schema) await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema.replace(/"/g, "")}"`);
    client.release();
  } catch (err) {
    await pool.end().catch(() => {
      // The pool never connected; the connection error below is the one worth reporting.
    });
    throw new StoreError(
      `cannot reach PostgreSQL at ${redactUrl(url, "postgres://(unparseable url)")}: ${(err as Error).message}`,
      { cause: err },
    );
  }
  const db = new Kysely<Database>({ dialect: new OwnSchemaPostgresDialect({ pool }) });
  const dedicatedConnection = async () => {
    const client = new pg.Client({
      connectionString: url,
      connectionTimeoutMillis: 5000,
      keepAlive: true,
      options: schema ? `-c search_path=${schema}` : undefined,
    });
    await client.connect();
    return client;
  };
  return { db, dialect: "postgres", location: redactUrl(url), close: () => db.destroy(), dedicatedConnection };
}

export async function openStore(options: OpenStoreOptions): Promise<Store> {
  const url = options.databaseUrl;
  if (url && /^postgres(ql)?:\/\//.test(url)) return openPostgres(url, options.pgSchema, options.poolSize ?? 10);
  const file = url?.startsWith("sqlite:")
    ? path.resolve(url.slice("sqlite:".length))
    : path.join(options.home, "wharf.db");
  try {
    return openSqlite(file);
  } catch (err) {
    throw new StoreError(`cannot open SQLite database ${file}: ${(err as Error).message}`, { cause: err });
  }
}

/** Portable "now" for timestamp columns. */
export function nowIso(): string {
  return new Date().toISOString();
}

export { sql };
