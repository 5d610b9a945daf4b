/**
 * `debug`, `checkpoints` and `tasks` chunks as the LangGraph server sends them: a checkpoint carries
 * `checkpoint` and `parent_checkpoint` ({thread_id, checkpoint_ns, checkpoint_id, checkpoint_map}),
 * `parent_config` instead of LangGraph JS's `parentConfig`, configs without internal (`__`) keys,
 * and each task whose state is a subgraph's config carries that as `checkpoint` (pure: table-tested).
 */
type Config = { configurable?: Record<string, unknown>; [k: string]: unknown } | null | undefined;

const CHECKPOINT_KEYS = ["thread_id", "checkpoint_ns", "checkpoint_id", "checkpoint_map"] as const;

function pick(configurable: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const k of CHECKPOINT_KEYS) if (k in configurable) out[k] = configurable[k];
  return out;
}

/** A root checkpoint as the thread's state and history name it: every key, `checkpoint_ns` "" and `checkpoint_map` null when unset. */
export function configToCheckpoint(config: Config): Record<string, unknown> | null {
  if (!config?.configurable?.thread_id) return null;
  const c = pick(config.configurable);
  return { ...c, checkpoint_ns: c.checkpoint_ns ?? "", checkpoint_map: c.checkpoint_map ?? null };
}

/** A task's state, when it is a subgraph's config (it has a namespace), as a checkpoint. */
function taskCheckpoint(state: unknown): Record<string, unknown> | null {
  const c = state as Config;
  if (!c || typeof c !== "object" || !c.configurable || !c.configurable.checkpoint_ns) return null;
  return pick(c.configurable);
}

function withoutInternal(config: Config): Config {
  if (!config?.configurable) return config;
  const { callbacks: _callbacks, ...rest } = config;
  return {
    ...rest,
    configurable: Object.fromEntries(Object.entries(config.configurable).filter(([k]) => !k.startsWith("__"))),
  };
}

export function debugTask(task: Record<string, unknown>): Record<string, unknown> {
  const checkpoint = taskCheckpoint(task.state);
  if (!checkpoint) return task;
  const { state: _state, ...rest } = task;
  return { ...rest, checkpoint };
}

export function debugCheckpoint(payload: Record<string, unknown>): Record<string, unknown> {
  const { parentConfig, ...rest } = payload;
  return {
    ...rest,
    checkpoint: configToCheckpoint(payload.config as Config),
    parent_checkpoint: configToCheckpoint(parentConfig as Config),
    tasks: Array.isArray(payload.tasks)
      ? payload.tasks.map((t) => debugTask(t as Record<string, unknown>))
      : payload.tasks,
    config: withoutInternal(payload.config as Config),
    parent_config: withoutInternal(parentConfig as Config),
  };
}

/** One library chunk of `mode` as the server sends it. */
export function serverChunk(mode: string, data: unknown): unknown {
  if (!data || typeof data !== "object") return data;
  if (mode === "checkpoints") return debugCheckpoint(data as Record<string, unknown>);
  if (mode === "tasks") return debugTask(data as Record<string, unknown>);
  if (mode === "debug") {
    const d = data as { type?: string; payload?: Record<string, unknown> };
    if (d.type === "checkpoint" && d.payload) return { ...d, payload: debugCheckpoint(d.payload) };
    if (d.type === "task_result" && d.payload) return { ...d, payload: debugTask(d.payload) };
  }
  return data;
}
