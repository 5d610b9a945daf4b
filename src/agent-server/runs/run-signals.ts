import crypto from "node:crypto";
import pg from "pg";
import type { Logger } from "../../log/logger.ts";
import { surviveClientErrors } from "../../store/pg-client-errors.ts";

export interface CancelSignal {
  serverId: string;
  runId: string;
  action: "interrupt" | "rollback";
}

/** A run is waiting `pending` for a free slot: every process with one looks for it now, not at its next poll. */
export interface WakeSignal {
  serverId: string;
  wake: true;
}

/**
 * Tells the process executing a run to cancel it, whichever process received the request; and
 * wakes the processes with a free slot when a run is left waiting for one.
 */
export interface RunSignals {
  cancel(signal: CancelSignal): Promise<void>;
  wake(serverId: string): Promise<void>;
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
/** Signals of a process that has no other process to tell (SQLite, one host): runs are cancelled locally. */
export const NO_RUN_SIGNALS: RunSignals = {
  cancel: async () => undefined,
  wake: async () => undefined,
  close: async () => undefined,
};

/** A notification's payload as a signal (pure: table-tested); null for anything else. */
export function parseSignal(payload: string): CancelSignal | WakeSignal | null {
  let v: unknown;
  try {
    v = JSON.parse(payload);
  } catch {
    return null; // not JSON: not ours
  }
  if (typeof v !== "object" || v === null) return null;
  const s = v as Record<string, unknown>;
  if (typeof s.serverId !== "string") return null;
  if (s.wake === true) return { serverId: s.serverId, wake: true };
  if (typeof s.runId === "string" && (s.action === "interrupt" || s.action === "rollback"))
    return { serverId: s.serverId, runId: s.runId, action: s.action };
  return null;
}

export async function openRunSignals(
  databaseUrl: string | null,
  log: Logger,
  onCancel: (s: CancelSignal) => void,
  channel: string = CHANNEL,
  onWake: (s: WakeSignal) => void = () => undefined,
): Promise<RunSignals> {
  if (!databaseUrl || !/^postgres(ql)?:\/\//.test(databaseUrl)) return NO_RUN_SIGNALS;
  const listener = new pg.Client({ connectionString: databaseUrl });
  listener.on("error", (err) => log.warn({ err }, "agent run signal connection failed; cross-process cancels are off"));
  await listener.connect();
  await listener.query(`LISTEN ${channel}`);
  listener.on("notification", (msg) => {
    const s = parseSignal(msg.payload ?? "");
    if (!s) log.warn({ payload: msg.payload?.slice(0, 200) }, "agent run signal ignored: not a cancel or wake signal");
    else if ("wake" in s) onWake(s);
    else onCancel(s);
  });
  const sender = new pg.Pool({ connectionString: databaseUrl, max: 1 });
  surviveClientErrors(sender, (err) => log.warn({ err }, "agent run signal sender connection failed"));
  return {
    cancel: async (s) => {
      await sender.query("SELECT pg_notify($1, $2)", [channel, JSON.stringify(s)]);
    },
    wake: async (serverId) => {
      await sender.query("SELECT pg_notify($1, $2)", [
        channel,
        JSON.stringify({ serverId, wake: true } satisfies WakeSignal),
      ]);
    },
    close: async () => {
      // Closing: a connection that already failed has nothing left to end.
      await listener.end().catch(() => undefined);
      await sender.end().catch(() => undefined);
    },
  };
}
