import type { AgentServerContext } from "../context.ts";
import type { AuthContext } from "../auth/custom-auth.ts";
import type { Assistant } from "../storage/assistants.ts";
import { prepareRun, withCurrentAssistant, type PrepareHost, type PreparedRun } from "./run-create.ts";
import type { AgentRunsTable } from "../storage/tables.ts";
import type { RunQueue } from "./run-queue.ts";
import { toRun, type Run, type RunKwargs, type RunPrivate } from "./runs.ts";
import type { ActiveRun, CancelAction, RequestHeaderPairs, RunCreate } from "./run-types.ts";

/** What admitting a new run needs of the run engine. */
export interface AdmissionHost extends PrepareHost {
  readonly ctx: AgentServerContext;
  readonly queue: RunQueue;
  hasSlot(): boolean;
  /** Keeps a queued run's caller data in memory until it starts here. */
  keepPrivate(runId: string, priv: RunPrivate): void;
  startLater(threadId: string, delayMs: number): void;
  /** A run of the thread was queued here for want of a free slot; `start` claims and starts it, if given. */
  queuedForSlot(threadId: string, start?: () => Promise<boolean>): void;
  wakeOthers(): void;
  launch(run: Run, kwargs: RunKwargs, priv: RunPrivate, assistant: Assistant | null): ActiveRun;
  cancel(threadId: string, runIds: string[], action: CancelAction): Promise<void>;
}

/** A stateless run's row: running here, or queued (delayed, or for want of a free slot). */
const stateless = (p: PreparedRun, startNow: boolean): AgentRunsTable => (startNow ? p.row : p.queued(p.row));

/** The run as the API shows it, without parsing back the JSON just written. */
const asRun = (p: PreparedRun, row: AgentRunsTable): Run =>
  toRun(row, { metadata: p.metadata, kwargs: p.kwargs, multitask: p.multitask });

/** Starts a recorded stateless run here, or leaves it queued for later or for another replica. */
function startStateless(
  host: AdmissionHost,
  p: PreparedRun,
  stored: AgentRunsTable,
  startNow: boolean,
): { run: Run; active: ActiveRun | null } {
  const { runId, kwargs, priv, row, assistant, delayMs } = p;
  // Stateless: no thread row, no checkpoints; the run row lives while the run does.
  if (startNow) return { run: asRun(p, row), active: host.launch(asRun(p, row), kwargs, priv, assistant) };
  if (delayMs > 0) {
    host.keepPrivate(runId, priv);
    host.startLater(row.thread_id, delayMs);
  } else {
    // No free slot here: queued for whichever replica has one (its caller data sealed for it). A
    // slot freed here claims it by id (its thread has nothing else to look at) and starts it from
    // what is in hand, unless it was cancelled or claimed elsewhere meanwhile.
    host.queuedForSlot(row.thread_id, async () => {
      const claimedAt = await host.queue.claimQueued(runId);
      if (claimedAt) host.launch(asRun(p, { ...row, updated_at: claimedAt }), kwargs, priv, assistant);
      return claimedAt !== null;
    });
    host.wakeOthers();
  }
  return { run: asRun(p, stored), active: null };
}

/** Validates and records a run; starts it at once when its thread is free. */
export async function admitRun(
  host: AdmissionHost,
  threadId: string | null,
  body: RunCreate,
  auth: AuthContext | null,
  headers: RequestHeaderPairs | null,
  opts: { protocol?: boolean } = {},
): Promise<{ run: Run; active: ActiveRun | null }> {
  const ctx = host.ctx;
  let prepared = await prepareRun(ctx, host, threadId, body, auth, headers, opts);
  if (prepared.temporary) {
    const startNow = prepared.delayMs === 0 && host.hasSlot();
    let stored = stateless(prepared, startNow);
    for (let tries = 1; !(await host.queue.insertRun(stored, prepared.assistantRow)); tries++) {
      prepared = await withCurrentAssistant(ctx, host, prepared, body, opts).then((p) =>
        // An assistant changing under every try: recorded as read, as any run whose assistant changes after.
        tries >= 2 ? { ...p, assistantRow: null } : p,
      );
      stored = stateless(prepared, startNow);
    }
    return startStateless(host, prepared, stored, startNow);
  }
  const { assistant, runId, kwargs, priv, row, queued, metadata, multitask, delayMs, now, filters } = prepared;

  const threadMetadata = { graph_id: assistant.graph_id, assistant_id: assistant.assistant_id };
  const { inflight, startNow } = await host.queue.insertThreadRun(
    threadId,
    { row, queued, metadata, threadMetadata, multitask, ifNotExists: body.if_not_exists, delayMs, now, filters },
    () => host.hasSlot(),
  );

  const run = toRun(startNow ? row : { ...row, status: "pending" });
  if (startNow) return { run, active: host.launch(run, kwargs, priv, assistant) };
  host.keepPrivate(runId, priv);
  if (multitask === "interrupt" || multitask === "rollback") await host.cancel(row.thread_id, inflight, multitask);
  if (delayMs > 0) host.startLater(row.thread_id, delayMs);
  // Queued for want of a slot here (not behind another run of its thread): a replica with one starts it.
  else if (inflight.length === 0) {
    host.queuedForSlot(row.thread_id);
    host.wakeOthers();
  }
  return { run, active: null };
}
