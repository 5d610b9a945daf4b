import type { AgentServerContext } from "../context.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import { PROTOCOL_EVENT } from "../runs/run-executor.ts";
import { convertClassicEvent, convertProtocolEvent, lifecycleOf, type ConvertState } from "./normalize.ts";
import type { LogOrigin, ThreadLog } from "./thread-log.ts";

/** Follows one run from its start to its end, appending its protocol events to the thread's log. */
export async function pumpRun(
  ctx: AgentServerContext,
  engine: RunEngine,
  log: ThreadLog,
  origin: LogOrigin,
  graphName: string,
): Promise<void> {
  const runId = origin.runId;
  // Replicas: the previous run's pump may be on another replica, its last events still on their way.
  if (log.sink) await log.rootSettled(10_000, engine.stopSignal);
  log.runStartSeq = log.lastSeq;
  log.noteRun(runId, log.lastSeq);
  log.append({ method: "lifecycle", namespace: [], data: { event: "running", graph_name: graphName } }, origin);
  // Executing here: its channel; elsewhere (replicas): its stream in Redis.
  const active = await engine.whenStarted(runId, engine.stopSignal);
  const events = active
    ? active.channel.follow(-1, engine.stopSignal)
    : await engine.follow(runId, -1, engine.stopSignal, true);
  const state: ConvertState = { announced: new Set() };
  let failed = false;
  if (events) {
    for await (const ev of events) {
      if (ev.event === "metadata") continue;
      if (ev.event === "error") {
        failed = true;
        const e = JSON.parse(ev.json) as { message?: string };
        log.append(
          {
            method: "lifecycle",
            namespace: [],
            data: { event: "failed", graph_name: graphName, error: e.message ?? "Run failed" },
          },
          origin,
        );
        continue;
      }
      const bodies =
        ev.event === PROTOCOL_EVENT
          ? convertProtocolEvent(JSON.parse(ev.json), state)
          : convertClassicEvent(ev.event, JSON.parse(ev.json), state);
      for (const b of bodies) log.append(b, origin);
    }
  }
  if (failed) return;
  const outcome = active ? await active.done : null;
  const row = outcome
    ? null
    : await ctx.db.selectFrom("agent_runs").select("status").where("run_id", "=", runId).executeTakeFirst();
  let status = lifecycleOf(outcome ? outcome.status : (row?.status ?? "error"));
  if (status === "completed" && (state.announced.size > 0 || outcome?.threadStatus === "interrupted"))
    status = "interrupted";
  if (status === "running") return;
  log.append(
    {
      method: "lifecycle",
      namespace: [],
      data: { event: status, graph_name: graphName, ...(outcome?.error ? { error: outcome.error.message } : {}) },
    },
    origin,
  );
}
