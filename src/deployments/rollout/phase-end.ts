import type { Kysely } from "kysely";
import type { Logger } from "../../log/logger.ts";
import type { Database } from "../../store/schema.ts";
import type { DeploymentRevisionsTable } from "../store/deployments-tables.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import { transition, type RevisionStatus } from "./revision-states.ts";

/** Why a rollout phase was aborted. */
export type AbortReason = "deadline" | "cancel" | "shutdown";

export interface PhaseDeps {
  db: Kysely<Database>;
  nodeId: string;
  log: Logger;
}

/** Arms a phase's deadline; the returned signal aborts on deadline, interrupt or shutdown. */
export function phaseSignal(
  entry: { controller: AbortController; reason: AbortReason | null },
  ms: number,
): { signal: AbortSignal; clear(): void } {
  const t = setTimeout(() => {
    entry.reason ??= "deadline";
    entry.controller.abort();
  }, ms);
  return { signal: entry.controller.signal, clear: () => clearTimeout(t) };
}

/** Ends a phase that threw: FAILED with the reason, INTERRUPTED on request, or handed back on shutdown. */
export async function endFailedPhase(
  d: PhaseDeps,
  rev: DeploymentRevisionsTable,
  from: RevisionStatus,
  failed: RevisionStatus,
  reason: AbortReason | null,
  err: Error,
  log: RevisionLog,
  deadlineMs: number,
): Promise<void> {
  const me = d.nodeId;
  const base = { owner: null, lease_until: null, pid: null, serving_url: null };
  if (reason === "shutdown") {
    const back: RevisionStatus = from === "BUILDING" ? "AWAITING_BUILD" : "AWAITING_DEPLOY";
    log.line(`the platform is shutting down: ${from} will resume at the next start`, "warning");
    await transition(d.db, rev.id, [from], back, { owner: me, reason: "platform shutdown", set: base });
    return;
  }
  if (reason === "cancel") {
    log.line("interrupted on request", "warning");
    await transition(d.db, rev.id, [from], "INTERRUPTED", {
      owner: me,
      reason: "interrupted on request",
      set: { ...base, status_message: "Interrupted on request" },
    });
    return;
  }
  const message =
    reason === "deadline"
      ? `${from === "BUILDING" ? "build" : "deploy"} deadline of ${Math.round(deadlineMs / 1000)} s exceeded`
      : err.message;
  log.line(`${failed}: ${message}`, "error");
  if (
    reason !== "deadline" &&
    !(
      err.name === "BuildError" ||
      err.name === "HealthError" ||
      err.name === "CommandFailed" ||
      err.name === "SourceError"
    )
  ) {
    d.log.warn({ err, revision: rev.id }, "revision phase failed");
  }
  await transition(d.db, rev.id, [from], failed, {
    owner: me,
    reason: message,
    set: { ...base, status_message: message },
  });
}
