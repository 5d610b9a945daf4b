import type { RunKwargs } from "./runs.ts";

/** How many times a run is started in all: the first attempt and one resume after a crash. */
export const MAX_ATTEMPTS = 2;

export type Recovery =
  | { action: "delete" }
  | { action: "error"; reason: string }
  | { action: "resume"; kwargs: RunKwargs; fromCheckpoint: boolean };

/**
 * What to do with a run whose process died while executing it (pure: table-tested). A stateless
 * run is dropped (its caller is gone with the connection). A thread run resumes once: from the
 * thread's last checkpoint when the run had written it (input null, as LangGraph resumes), else
 * from its own input; the caller's sealed user and headers are needed to run it as them. Anything
 * else ends as `error` with the reason.
 */
export function planRecovery(
  kwargs: RunKwargs,
  opts: { temporary: boolean; headRunId: string | null; runId: string },
): Recovery {
  if (opts.temporary) return { action: "delete" };
  const attempt = kwargs.attempt ?? 1;
  // Drained attempts handed their run back cleanly: only crashed ones count against the limit.
  const crashed = attempt - (kwargs.handbacks ?? 0);
  if (crashed >= MAX_ATTEMPTS)
    return { action: "error", reason: `the process running it died during attempt ${attempt} of ${MAX_ATTEMPTS}` };
  if (!kwargs.sealed_private)
    return { action: "error", reason: "the process running it died and the caller's data to resume it was not kept" };
  const fromCheckpoint = opts.headRunId === opts.runId;
  const next: RunKwargs = { ...kwargs, attempt: attempt + 1 };
  if (fromCheckpoint) {
    next.input = null;
    next.command = null;
  }
  return { action: "resume", kwargs: next, fromCheckpoint };
}
