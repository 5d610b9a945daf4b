import type { AgentServerContext } from "../context.ts";
import type { AuthContext } from "../auth/custom-auth.ts";
import type { Assistant } from "../storage/assistants.ts";
import { prepareRun, type PrepareHost } from "./run-create.ts";
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
  /** A run of the thread was queued here for want of a free slot. */
  queuedForSlot(threadId: string): void;
  wakeOthers(): void;
  launch(run: Run, kwargs: RunKwargs, priv: RunPrivate, assistant: Assistant | null): ActiveRun;
  cancel(threadId: string, runIds: string[], action: CancelAction): Promise<void>;
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
  const prepared = await prepareRun(ctx, host, threadId, body, auth, headers, opts);
  const { assistant, runId, kwargs, priv, row, queued, metadata, multitask, temporary, delayMs, now, filters } =
    prepared;

  if (temporary && delayMs > 0) {
    await host.queue.insertRun(queued(row));
    host.keepPrivate(runId, priv);
    host.startLater(row.thread_id, delayMs);
    return { run: toRun(queued(row)), active: null };
  }
  if (temporary && !host.hasSlot()) {
    // No free slot here: queued for whichever replica has one (its caller data sealed for it).
    await host.queue.insertRun(queued(row));
    host.queuedForSlot(row.thread_id);
    host.wakeOthers();
    return { run: toRun(queued(row)), active: null };
  }
  if (temporary) {
    // Stateless: no thread row, no checkpoints; the run row lives while the run does.
    await host.queue.insertRun(row);
    return { run: toRun(row), active: host.launch(toRun(row), kwargs, priv, assistant) };
  }

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
