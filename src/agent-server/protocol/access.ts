import type { AgentServerContext } from "../context.ts";
import type { AuthContext } from "../auth/custom-auth.ts";
import { AgentError } from "../errors.ts";
import { findThreadRow, toThread, type Thread } from "../storage/threads.ts";

/**
 * Whether the caller may use a thread over the protocol: a thread that does not exist yet is
 * fine (the first `run.start` creates it, under the `threads:create_run` rules); one that exists
 * must be readable by the caller, as for `GET /threads/{id}`. Throws a 404 `AgentError` for
 * another user's thread (it is not theirs to know about), or the auth handler's own refusal.
 */
export async function checkThreadAccess(
  ctx: AgentServerContext,
  auth: AuthContext | null,
  threadId: string,
): Promise<Thread | null> {
  const filters = ctx.customAuth
    ? (await ctx.customAuth.authorize(auth, "threads:read", { thread_id: threadId })).filters
    : undefined;
  const visible = await findThreadRow(ctx.db, ctx, threadId, filters);
  if (visible) return toThread(visible);
  if (filters && (await findThreadRow(ctx.db, ctx, threadId, undefined)))
    throw new AgentError(404, `Thread with ID ${threadId} not found`);
  return null;
}
