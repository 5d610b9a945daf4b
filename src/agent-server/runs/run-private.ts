import type { AgentServerContext } from "../context.ts";
import type { RunKwargs, RunPrivate } from "./runs.ts";

/** The caller's data of a run, sealed into its row (bound to the server and the run). */
export function sealRunPrivate(ctx: AgentServerContext, runId: string, priv: RunPrivate) {
  return ctx.box.seal(JSON.stringify(priv), `agent-run-private:${ctx.serverId}:${runId}`);
}

/** A run's caller data: kept in memory when created here, else opened from its row (empty if it cannot be). */
export function openRunPrivate(
  ctx: AgentServerContext,
  runId: string,
  kwargs: RunKwargs,
  known: RunPrivate | undefined,
): RunPrivate {
  if (known) return known;
  if (!kwargs.sealed_private) return { configurable: {} };
  try {
    return JSON.parse(ctx.box.open(kwargs.sealed_private, `agent-run-private:${ctx.serverId}:${runId}`)) as RunPrivate;
  } catch (err) {
    ctx.log.warn({ err, runId }, "cannot open a queued run's caller data; running without it");
    return { configurable: {} };
  }
}
