import type { Kysely } from "kysely";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import type { Database } from "../../store/schema.ts";
import "./deployments-tables.ts";
import { queryLogs, type LogPage } from "./log-query.ts";

export type LogKind = "build" | "deploy";
export type LogLevel = "info" | "warning" | "error";

export interface LogEntry {
  id: string;
  timestamp: string;
  level: string;
  message: string;
}

const MAX_LINE_CHARS = 4000;
/** Per revision and kind: a crash-looping server must not fill the database. */
const MAX_LINES = 5000;

/**
 * Build and deploy log of one revision, stored with it. Lines are buffered and written in batches;
 * every known secret value is replaced by `***` before a line is kept, so a project that prints its
 * environment does not leak the deployment's secrets into the API.
 */
export class RevisionLog {
  private pending: Array<{
    id: string;
    revision_id: string;
    kind: string;
    level: string;
    message: string;
    timestamp: string;
  }> = [];
  private flushing: Promise<void> = Promise.resolve();
  private timer: NodeJS.Timeout | null = null;
  private written = 0;
  private capped = false;

  constructor(
    private readonly db: Kysely<Database>,
    readonly revisionId: string,
    readonly kind: LogKind,
    private readonly redactions: string[] = [],
  ) {}

  line(message: string, level: LogLevel = "info"): void {
    if (this.capped) return;
    if (this.written >= MAX_LINES) {
      this.capped = true;
      message = `log limit of ${MAX_LINES} lines reached; further output of this revision is dropped`;
      level = "warning";
    }
    this.written++;
    let text = message.length > MAX_LINE_CHARS ? message.slice(0, MAX_LINE_CHARS) + "…" : message;
    for (const secret of this.redactions) if (secret.length >= 4) text = text.split(secret).join("***");
    this.pending.push({
      id: newId(),
      revision_id: this.revisionId,
      kind: this.kind,
      level,
      message: text,
      timestamp: nowIso(),
    });
    this.timer ??= setTimeout(() => void this.flush(), 200);
  }

  /** Splits a chunk of process output into lines (keeping a partial last line for the next chunk). */
  lineSink(level: LogLevel = "info"): (chunk: Buffer | string) => void {
    let partial = "";
    return (chunk) => {
      const text = partial + chunk.toString();
      const lines = text.split(/\r?\n/);
      partial = lines.pop() ?? "";
      if (partial.length > MAX_LINE_CHARS) {
        lines.push(partial);
        partial = "";
      }
      for (const l of lines) if (l.trim() !== "") this.line(l, level);
    };
  }

  flush(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    const batch = this.pending;
    this.pending = [];
    this.flushing = this.flushing.then(async () => {
      if (batch.length === 0) return;
      // The revision may have been deleted meanwhile: losing its log is then the right outcome.
      await this.db
        .insertInto("deployment_revision_logs")
        .values(batch)
        .execute()
        .catch(() => undefined);
    });
    return this.flushing;
  }
}

/** One page of one revision's log (see `queryLogs` for the cursor). */
export function readLogs(
  db: Kysely<Database>,
  revisionId: string,
  kind: LogKind,
  options: { after?: string | null; limit: number; order: "asc" | "desc" },
): Promise<LogPage> {
  return queryLogs(db, [revisionId], kind, options);
}

/** The last lines of a revision's log, for error messages (the CLI prints them on failure). */
export async function logTail(db: Kysely<Database>, revisionId: string, kind: LogKind, lines = 30): Promise<string[]> {
  const rows = await db
    .selectFrom("deployment_revision_logs")
    .select(["message"])
    .where("revision_id", "=", revisionId)
    .where("kind", "=", kind)
    .orderBy("id", "desc")
    .limit(lines)
    .execute();
  return rows.reverse().map((r) => r.message);
}
