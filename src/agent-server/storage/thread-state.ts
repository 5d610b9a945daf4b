import type { AgentServerContext } from "../context.ts";
import { AgentError } from "../errors.ts";
import type { RunnableGraph } from "../project/graphs.ts";
import { isPythonGraph, type PythonGraph } from "../python/index.ts";
import type { Thread } from "./threads.ts";
import { getAssistant } from "./assistants.ts";

const checkpointOf = (config: { configurable?: Record<string, unknown> } | undefined | null) => {
  const c = config?.configurable;
  if (!c?.checkpoint_id) return null;
  return {
    thread_id: c.thread_id,
    checkpoint_ns: c.checkpoint_ns ?? "",
    checkpoint_id: c.checkpoint_id,
    checkpoint_map: c.checkpoint_map ?? null,
  };
};

/**
 * A pending task's state when it is a subgraph's config (it has a namespace, maybe no checkpoint id
 * yet): that subgraph's checkpoint, as the LangGraph server reports it.
 */
const taskCheckpointOf = (state: { configurable?: Record<string, unknown> } | undefined | null) => {
  const c = state?.configurable;
  if (!c?.checkpoint_ns) return checkpointOf(state);
  const out: Record<string, unknown> = {};
  for (const k of ["thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint_map"]) if (k in c) out[k] = c[k];
  return out;
};

/** A LangGraph `StateSnapshot` in the API's `ThreadState` shape. */
export function toThreadState(s: any): Record<string, unknown> {
  const tasks = (s.tasks ?? []).map((t: any) => ({
    id: t.id,
    name: t.name,
    path: t.path ?? [],
    error: t.error ? String(t.error?.message ?? t.error) : null,
    interrupts: t.interrupts ?? [],
    checkpoint: taskCheckpointOf(t.state),
    state: t.state && !t.state.configurable ? toThreadState(t.state) : null,
    // Always present (null while the task is pending), as the LangGraph server writes it.
    result: t.result ?? null,
  }));
  return {
    values: s.values ?? {},
    next: s.next ?? [],
    tasks,
    metadata: s.metadata ?? {},
    created_at: s.createdAt ?? null,
    checkpoint: checkpointOf(s.config),
    parent_checkpoint: checkpointOf(s.parentConfig),
    interrupts: tasks.flatMap((t: { interrupts: unknown[] }) => t.interrupts),
  };
}

export const emptyState = (threadId: string) => ({
  values: {},
  next: [],
  tasks: [],
  metadata: {},
  created_at: null,
  checkpoint: { thread_id: threadId, checkpoint_ns: "", checkpoint_id: null, checkpoint_map: null },
  parent_checkpoint: null,
  interrupts: [],
});

/** The graph a thread's state belongs to: its `graph_id` metadata, or the only graph of the project. */
export async function graphForThread(
  ctx: AgentServerContext,
  thread: Thread,
): Promise<RunnableGraph | PythonGraph | null> {
  const graphId =
    typeof thread.metadata.graph_id === "string"
      ? thread.metadata.graph_id
      : ctx.graphs.size === 1
        ? [...ctx.graphs.keys()][0]
        : null;
  if (!graphId) return null;
  const loaded = ctx.graphs.get(graphId);
  if (!loaded) throw new AgentError(404, `Graph "${graphId}" of thread ${thread.thread_id} not found`);
  if (isPythonGraph(loaded)) return loaded;
  // A graph factory is rebuilt with the configurable of the thread's assistant (the one its last
  // run used), as the LangGraph server rebuilds it with the thread's config: its nodes may depend on it.
  const assistantId = typeof thread.metadata.assistant_id === "string" ? thread.metadata.assistant_id : null;
  // A deleted assistant leaves the graph built without its config, as for a thread that never ran.
  const assistant = assistantId ? await getAssistant(ctx, assistantId, undefined).catch(() => null) : null;
  const fromAssistant =
    assistant?.graph_id === graphId ? ((assistant.config?.configurable ?? {}) as Record<string, unknown>) : {};
  return loaded.get({ configurable: { ...fromAssistant, thread_id: thread.thread_id } }, ctx.checkpointer.saver);
}

/** Copies every checkpoint and pending write of a thread to another thread id. */
export async function copyCheckpoints(ctx: AgentServerContext, from: string, to: string): Promise<void> {
  const saver = ctx.checkpointer.saver;
  const tuples: any[] = [];
  for await (const t of saver.list({ configurable: { thread_id: from } })) tuples.push(t);
  for (const t of tuples.reverse()) {
    const ns = t.config.configurable?.checkpoint_ns ?? "";
    const parent = t.parentConfig?.configurable?.checkpoint_id;
    await saver.put(
      { configurable: { thread_id: to, checkpoint_ns: ns, ...(parent ? { checkpoint_id: parent } : {}) } },
      t.checkpoint,
      t.metadata,
      t.checkpoint.channel_versions,
    );
    const byTask = new Map<string, Array<[string, unknown]>>();
    for (const [taskId, channel, value] of t.pendingWrites ?? []) {
      if (!byTask.has(taskId)) byTask.set(taskId, []);
      byTask.get(taskId)!.push([channel, value]);
    }
    for (const [taskId, writes] of byTask)
      await saver.putWrites(
        { configurable: { thread_id: to, checkpoint_ns: ns, checkpoint_id: t.checkpoint.id } },
        writes as never,
        taskId,
      );
  }
}
