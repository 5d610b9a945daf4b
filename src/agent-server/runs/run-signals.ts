import crypto from "node:crypto";
import pg from "pg";
import type { Logger } from "../../log/logger.ts";

export interface CancelSignal {
  serverId: string;
  runId: string;
  action: "interrupt" | "rollback";
}

/** Tells the process executing a run to cancel it, whichever process received the request. */
export interface RunSignals {
  cancel(signal: CancelSignal): Promise<void>;
  close(): Promise<void>;
}

const CHANNEL = "wharf_agent_run_cancel";

/**
 * The notification channel. Channels are database-wide and any role may LISTEN or NOTIFY on any of
 * them: a deployment's agent server, whose role can touch nothing else, must not see or forge
 * another server's cancels. With a secret its processes share (a deployment's agent key) the
 * channel's name is derived from it, so no one else can name it.
 */
export function signalChannel(serverId: string, secret?: string): string {
  if (!secret) return CHANNEL;
  return `${CHANNEL}_${crypto.createHmac("sha256", secret).update(`run-cancel:${serverId}`).digest("hex").slice(0, 32)}`;
}

/**
 * PostgreSQL `LISTEN/NOTIFY` on one dedicated connection per process: no polling, and no extra
 * infrastructure. With SQLite (one host) there is nothing to signal: runs are cancelled locally.
 */
export async function openRunSignals(databaseUrl: string | null, log: Logger, onCancel: (s: CancelSignal) => void, channel: string = CHANNEL): Promise<RunSignals> {
  if (!databaseUrl || !/^postgres(ql)?:\/\//.test(databaseUrl)) return { cancel: async () => {}, close: async () => {} };
  const listener = new pg.Client({ connectionString: databaseUrl });
  listener.on("error", (err) => log.warn({ err: err.message }, "agent run signal connection failed; cross-process cancels are off"));
  await listener.connect();
  await listener.query(`LISTEN ${channel}`);
  listener.on("notification", (msg) => {
    try {
      onCancel(JSON.parse(msg.payload ?? "") as CancelSignal);
    } catch {}
  });
  const sender = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  sender.on("error", () => {});
  return {
    cancel: async (s) => {
      await sender.query("SELECT pg_notify($1, $2)", [channel, JSON.stringify(s)]);
    },
    close: async () => {
      await listener.end().catch(() => {});
      await sender.end().catch(() => {});
    },
  };
}
