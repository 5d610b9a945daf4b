import { isWebhookPath } from "../runs/webhook.ts";
import { z } from "zod";

/** Request bodies of the LangGraph server API. Unknown fields are ignored (real clients send extras). */
const obj = z.record(z.string(), z.unknown());
const nullish = <T extends z.ZodType>(t: T) => t.nullish();

export const STREAM_MODES = [
  "values",
  "messages",
  "messages-tuple",
  "tasks",
  "checkpoints",
  "updates",
  "events",
  "debug",
  "custom",
  "tools",
] as const;
const streamMode = z.enum(STREAM_MODES);
const interruptNodes = z.union([z.literal("*"), z.array(z.string())]);

export const runConfig = z.looseObject({
  tags: nullish(z.array(z.string())),
  recursion_limit: nullish(z.number().int().positive()),
  configurable: nullish(obj),
});

export const runCreate = z.looseObject({
  assistant_id: z.string().min(1),
  input: z.unknown().optional(),
  command: nullish(
    z.looseObject({ update: z.unknown().optional(), resume: z.unknown().optional(), goto: z.unknown().optional() }),
  ),
  config: nullish(runConfig),
  context: nullish(obj),
  metadata: nullish(obj),
  stream_mode: nullish(z.union([streamMode, z.array(streamMode)])),
  stream_subgraphs: nullish(z.boolean()),
  stream_resumable: nullish(z.boolean()),
  feedback_keys: nullish(z.array(z.string())),
  interrupt_before: nullish(interruptNodes),
  interrupt_after: nullish(interruptNodes),
  // A URL, or a path of this server (`/my/hook`) as the LangGraph server accepts.
  webhook: nullish(
    z.union([
      z.string().url(),
      z.string().refine(isWebhookPath, "Invalid URL: expected an http(s) URL or a path starting with /"),
    ]),
  ),
  multitask_strategy: nullish(z.enum(["reject", "interrupt", "rollback", "enqueue"])),
  if_not_exists: nullish(z.enum(["create", "reject"])),
  on_completion: nullish(z.enum(["delete", "keep"])),
  on_disconnect: nullish(z.enum(["cancel", "continue"])),
  checkpoint_id: nullish(z.string()),
  checkpoint: nullish(obj),
  after_seconds: nullish(z.number().min(0)),
  durability: nullish(z.enum(["sync", "async", "exit"])),
});

export const runBatch = z.array(runCreate).min(1).max(100);

const sortOrder = nullish(z.enum(["asc", "desc"]));
const limit = z.number().int().min(1).max(1000).default(10);
const offset = z.number().int().min(0).default(0);

export const assistantSearch = z.looseObject({
  graph_id: nullish(z.string()),
  name: nullish(z.string()),
  metadata: nullish(obj),
  limit,
  offset,
  sort_by: nullish(z.enum(["assistant_id", "graph_id", "name", "created_at", "updated_at"])),
  sort_order: sortOrder,
});

export const assistantCount = z.looseObject({
  graph_id: nullish(z.string()),
  name: nullish(z.string()),
  metadata: nullish(obj),
});

export const assistantCreate = z.looseObject({
  graph_id: z.string().min(1),
  assistant_id: nullish(z.string().uuid()),
  config: nullish(runConfig),
  context: nullish(obj),
  metadata: nullish(obj),
  if_exists: nullish(z.enum(["raise", "do_nothing"])),
  name: nullish(z.string()),
  description: nullish(z.string()),
});

export const assistantPatch = z.looseObject({
  graph_id: nullish(z.string().min(1)),
  config: nullish(runConfig),
  context: nullish(obj),
  metadata: nullish(obj),
  name: nullish(z.string()),
  description: nullish(z.string()),
});

export const assistantVersions = z.looseObject({ metadata: nullish(obj), limit, offset });
export const assistantLatest = z.looseObject({ version: z.number().int().min(1) });

const superstep = z.looseObject({
  updates: z
    .array(z.looseObject({ values: z.unknown().optional(), command: nullish(obj), as_node: z.string().min(1) }))
    .min(1),
});

export const threadCreate = z.looseObject({
  thread_id: nullish(z.string().uuid()),
  metadata: nullish(obj),
  if_exists: nullish(z.enum(["raise", "do_nothing"])),
  // Checkpoints to write at creation (`threads.create({supersteps})`), one superstep each.
  supersteps: nullish(z.array(superstep).min(1)),
});

export const threadPatch = z.looseObject({ metadata: nullish(obj) });

const threadStatus = z.enum(["idle", "busy", "interrupted", "error"]);
export const threadSearch = z.looseObject({
  ids: nullish(z.array(z.string().uuid())),
  metadata: nullish(obj),
  values: nullish(obj),
  status: nullish(threadStatus),
  limit,
  offset,
  sort_by: nullish(z.enum(["thread_id", "status", "created_at", "updated_at"])),
  sort_order: sortOrder,
});
export const threadCount = z.looseObject({
  metadata: nullish(obj),
  values: nullish(obj),
  status: nullish(threadStatus),
});

export const threadListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(10),
  offset: z.coerce.number().int().min(0).default(0),
  status: threadStatus.optional(),
});

export const stateUpdate = z.looseObject({
  values: z.unknown().optional(),
  as_node: nullish(z.string()),
  checkpoint_id: nullish(z.string()),
  checkpoint: nullish(obj),
});

export const statePatch = z.looseObject({ metadata: obj });

export const stateAtCheckpoint = z.looseObject({ checkpoint: obj, subgraphs: nullish(z.boolean()) });

export const history = z.looseObject({
  limit: z.number().int().min(1).max(1000).default(10),
  before: nullish(z.union([z.string(), obj])),
  metadata: nullish(obj),
  checkpoint: nullish(obj),
});

export const runListQuery = z.object({
  limit: z.coerce.number().int().min(1).max(1000).default(10),
  offset: z.coerce.number().int().min(0).default(0),
  status: z.enum(["pending", "running", "error", "success", "timeout", "interrupted"]).optional(),
});

export const cancelQuery = z.object({
  wait: z.enum(["0", "1", "true", "false"]).optional(),
  action: z.enum(["interrupt", "rollback"]).default("interrupt"),
});

export const uuidParam = z.string().uuid();

// The store API (`/store/*`). Label rules (non-empty, no ".") are checked by the store, as a 422.
const namespace = z.array(z.string());
export const storePut = z.looseObject({
  namespace,
  key: z.string().min(1),
  value: obj,
  // `index`: false or the fields to embed (with `store.index`); `ttl`: minutes (null: never expires).
  index: nullish(z.union([z.literal(false), z.array(z.string())])),
  ttl: nullish(z.number().positive()),
});
export const storeDelete = z.looseObject({ namespace: nullish(namespace), key: z.string().min(1) });
export const storeGet = z.looseObject({
  namespace: z.string().default(""),
  key: z.string().min(1),
  refresh_ttl: z.string().optional(),
});
export const storeSearch = z.looseObject({
  namespace_prefix: nullish(namespace),
  filter: nullish(obj),
  limit: nullish(z.number().int().min(1).max(1000)),
  offset: nullish(z.number().int().min(0)),
  query: nullish(z.string()),
  refresh_ttl: nullish(z.boolean()),
});
export const storeNamespaces = z.looseObject({
  prefix: nullish(namespace),
  suffix: nullish(namespace),
  max_depth: nullish(z.number().int().min(1)),
  limit: nullish(z.number().int().min(1).max(1000)),
  offset: nullish(z.number().int().min(0)),
});
