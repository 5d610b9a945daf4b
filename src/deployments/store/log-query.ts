import { sql, type Kysely } from "kysely";
import type { Database } from "../../store/schema.ts";
import type { LogEntry, LogKind } from "./revision-logs.ts";
import "./deployments-tables.ts";

/** The filters LangSmith Deployment's log queries take (`--level`, `-q`, `--start-time`, `--end-time` of the CLIs). */
export interface LogFilter {
  /** Exact level, any case (`ERROR` matches lines logged `error`). */
  level?: string;
  /** Case-insensitive substring of the message. */
  query?: string;
  /** ISO 8601 bounds on the line's timestamp, both inclusive. */
  since?: string;
  until?: string;
}

export interface LogPageRequest {
  after?: string | null;
  limit: number;
  order: "asc" | "desc";
  filter?: LogFilter;
}

export interface LogPage {
  logs: LogEntry[];
  next_offset: string | null;
}

/** A LIKE pattern matching `text` literally anywhere (with `ESCAPE '\'`). */
export function containsPattern(text: string): string {
  return `%${text.toLowerCase().replace(/[\\%_]/g, (c) => `\\${c}`)}%`;
}

/**
 * The cursor a page answers: the last line it returned, so that the next call reads on from there,
 * and null only when it returned nothing. The official deploy CLIs poll a growing build log with
 * `offset = next_offset or previous offset`: a last page answering null made them read it again
 * from the previous cursor and print its lines once more.
 */
export function nextOffset(logs: LogEntry[]): string | null {
  return logs.length ? logs[logs.length - 1].id : null;
}

/** One page of the log of `kind` of the given revisions (one revision, or all of a deployment's), lines in id order. */
export async function queryLogs(
  db: Kysely<Database>,
  revisionIds: string[],
  kind: LogKind,
  req: LogPageRequest,
): Promise<LogPage> {
  if (revisionIds.length === 0) return { logs: [], next_offset: null };
  let q = db
    .selectFrom("deployment_revision_logs")
    .select(["id", "timestamp", "level", "message"])
    .where("revision_id", "in", revisionIds)
    .where("kind", "=", kind);
  if (req.after) q = q.where("id", req.order === "asc" ? ">" : "<", req.after);
  const f = req.filter ?? {};
  if (f.level) q = q.where("level", "=", f.level.toLowerCase());
  // The escape character is explicit: SQLite's LIKE has none by default.
  if (f.query) q = q.where(sql<boolean>`lower(${sql.ref("message")}) like ${containsPattern(f.query)} escape '\\'`);
  if (f.since) q = q.where("timestamp", ">=", f.since);
  if (f.until) q = q.where("timestamp", "<=", f.until);
  const logs = await q.orderBy("id", req.order).limit(req.limit).execute();
  return { logs, next_offset: nextOffset(logs) };
}
