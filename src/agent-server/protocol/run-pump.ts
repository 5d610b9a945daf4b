import type { ThreadEventStore } from "../../cluster/index.ts";
import type { AgentServerContext } from "../context.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import type { RunEvent } from "../runs/run-channel.ts";
import { PROTOCOL_EVENT, type RunOutcome } from "../runs/run-executor.ts";
import type { ActiveRun } from "../runs/run-types.ts";
import type { EventBody } from "./events.ts";
import { convertClassicEvent, convertProtocolEvent, lifecycleOf, type ConvertState } from "./normalize.ts";
import { SharedLogWriter } from "./shared-log.ts";
import { eventJson, type LogOrigin, type ThreadLog, type ThreadLogs } from "./thread-log.ts";

/** How long a run's pump waits for the announcement of its run, and an announcement for the previous run's end. */
const ORDER_WAIT_MS = 10_000;

const running = (graphName: string): EventBody => ({
  method: "lifecycle",
  namespace: [],
  data: { event: "running", graph_name: graphName },
});

/** Where a run's converted events go: the bodies from one run event (`through`) as one unit. */
type Emit = (bodies: EventBody[], through: number) => void;

/**
 * Converts a run's events into protocol events until the run's stream ends. True when the run
 * failed (its `failed` lifecycle is emitted then, and nothing follows it).
 */
async function convertRun(
  events: AsyncIterable<RunEvent>,
  graphName: string,
  state: ConvertState,
  emit: Emit,
): Promise<boolean> {
  for await (const ev of events) {
    if (ev.event === "metadata") continue;
    if (ev.event === "error") {
      const e = JSON.parse(ev.json) as { message?: string };
      const data = { event: "failed", graph_name: graphName, error: e.message ?? "Run failed" };
      emit([{ method: "lifecycle", namespace: [], data }], ev.id);
      return true;
    }
    const bodies =
      ev.event === PROTOCOL_EVENT
        ? convertProtocolEvent(JSON.parse(ev.json), state)
        : convertClassicEvent(ev.event, JSON.parse(ev.json), state);
    emit(bodies, ev.id);
  }
  return false;
}

/** The run's final lifecycle event (null while it still runs). */
function finalLifecycle(
  graphName: string,
  status: string,
  state: ConvertState,
  outcome: RunOutcome | null,
): EventBody | null {
  let event = lifecycleOf(status);
  if (event === "completed" && (state.announced.size > 0 || outcome?.threadStatus === "interrupted"))
    event = "interrupted";
  if (event === "running") return null;
  const data = { event, graph_name: graphName, ...(outcome?.error ? { error: outcome.error.message } : {}) };
  return { method: "lifecycle", namespace: [], data };
}

/** One process: follows one run from its start to its end, appending its protocol events to the thread's log. */
export async function pumpRun(
  ctx: AgentServerContext,
  engine: RunEngine,
  log: ThreadLog,
  origin: LogOrigin,
  graphName: string,
): Promise<void> {
  const runId = origin.runId;
  log.runStartSeq = log.lastSeq;
  log.noteRun(runId, log.lastSeq);
  log.append(running(graphName), origin);
  const active = await engine.whenStarted(runId, engine.stopSignal);
  const events = active
    ? active.channel.follow(-1, engine.stopSignal)
    : await engine.follow(runId, -1, engine.stopSignal, true);
  const state: ConvertState = { announced: new Set() };
  const emit: Emit = (bodies) => bodies.forEach((b) => log.append(b, origin));
  if (events && (await convertRun(events, graphName, state, emit))) return;
  const outcome = active ? await active.done : null;
  const row = outcome
    ? null
    : await ctx.db.selectFrom("agent_runs").select("status").where("run_id", "=", runId).executeTakeFirst();
  const end = finalLifecycle(graphName, outcome ? outcome.status : (row?.status ?? "error"), state, outcome);
  if (end) log.append(end, origin);
}

/**
 * Replicas, on the replica that received `run.start` or `input.respond`: announces the run (its
 * `running` lifecycle, naming the assistant the client bound the thread to) once the previous
 * run's last lifecycle event is in the log. The run's own events come from its executing replica.
 */
export async function announceRun(
  engine: RunEngine,
  log: ThreadLog,
  origin: LogOrigin,
  graphName: string,
): Promise<void> {
  await log.rootSettled(ORDER_WAIT_MS, engine.stopSignal);
  log.runStartSeq = log.lastSeq;
  log.noteRun(origin.runId, log.lastSeq);
  log.append(running(graphName), origin);
}

/** Takes the run's pump for this attempt, retrying while Redis is unreachable; null when a later attempt has it. */
async function claimPump(store: ThreadEventStore, threadId: string, active: ActiveRun, attempt: number) {
  for (let i = 0; ; i++) {
    try {
      return await store.claimPump(threadId, active.run.run_id, attempt);
    } catch (err) {
      if (active.abort.signal.aborted) throw err;
      await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** i)).unref());
    }
  }
}

/**
 * Resolves once the attempt has taken its run's stream: its first event (`metadata`) is pushed
 * after that, and a later attempt's channel numbers its events from the stream's top only then.
 */
async function attached(active: ActiveRun, signal: AbortSignal): Promise<void> {
  if (active.channel.events.length || active.channel.closed) return;
  // Only the wake-up of the first push (or the close) is wanted, not what it yields.
  const first = active.channel.follow(-1, signal);
  await first.next();
  await first.return(undefined);
}

export interface PumpHost {
  ctx: AgentServerContext;
  engine: RunEngine;
  logs: ThreadLogs;
  store: ThreadEventStore;
  graphName(assistantId: string): Promise<string>;
}

/**
 * Replicas, on the replica that executes a protocol run: converts the run's events into its
 * thread's log, fenced by the run's attempt as the run's own events are. A later attempt (the run
 * taken over after this replica died) continues after the last run event this one converted, read
 * from the run's stream, so the thread's log loses nothing the run's stream kept.
 */
export async function pumpHere(host: PumpHost, active: ActiveRun, attempt: number): Promise<void> {
  const { engine } = host;
  const { run_id: runId, thread_id: threadId } = active.run;
  if (!threadId) return;
  const through = await claimPump(host.store, threadId, active, attempt);
  if (through === null) return;
  const log = await host.logs.open(threadId);
  const graphName = await host.graphName(active.run.assistant_id);
  await log.until(() => log.hasRun(runId), ORDER_WAIT_MS, engine.stopSignal);
  const origin: LogOrigin = { runId, assistantId: log.assistantId ?? active.run.assistant_id };
  const writer = new SharedLogWriter(threadId, host.store, log, host.ctx.log, { runId, attempt });
  const stop = new AbortController();
  writer.onFenced = () => stop.abort();
  const onStop = () => stop.abort();
  engine.stopSignal.addEventListener("abort", onStop, { once: true });
  try {
    const emit: Emit = (bodies, n) => writer.pushGroup(bodies.map(eventJson), origin, n);
    // The receiver died before announcing it: the run is announced here.
    if (!log.hasRun(runId)) emit([running(graphName)], -1);
    await attached(active, stop.signal);
    const events = await engine.follow(runId, through, stop.signal, true);
    const state: ConvertState = { announced: new Set() };
    if (events && (await convertRun(events, graphName, state, emit))) return;
    const outcome = await active.done;
    // Drained or fenced: the run goes on as a later attempt, whose pump continues from here.
    if (outcome.drained || outcome.fenced || stop.signal.aborted) return;
    const end = finalLifecycle(graphName, outcome.status, state, outcome);
    if (end) emit([end], -1);
  } finally {
    engine.stopSignal.removeEventListener("abort", onStop);
    await writer.drained(5000);
  }
}
