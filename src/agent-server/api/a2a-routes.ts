import { randomUUID } from "node:crypto";
import type { Hono } from "hono";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { AgentError } from "../errors.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import { getRunRow } from "../runs/runs.ts";
import { getAssistant, resolveAssistantId, type Assistant } from "../storage/assistants.ts";
import { createThread, findThreadRow, toThread } from "../storage/threads.ts";
import { guardController, type GuardedController } from "../../http/web-stream.ts";
import { CORS_HEADERS } from "../wire.ts";
import { invokeAssistant, outputText, type InvokeResult } from "./assistant-invoke.ts";
import {
  artifactUpdate,
  isUuid,
  JSONRPC,
  messageInput,
  parseMessage,
  rpcError,
  rpcResult,
  statusUpdate,
  task,
  taskState,
  type A2aMessage,
} from "./a2a-protocol.ts";
import { sharedJsonBody } from "./json-body.ts";
import { authorize, type C } from "./route-helpers.ts";

const rpc = (value: unknown, status = 200) =>
  new Response(JSON.stringify(value), { status, headers: { ...CORS_HEADERS, "content-type": "application/json" } });

/** The A2A agent card of one assistant (v0.3 JSON, JSON-RPC at `/a2a/{assistant_id}`). */
function agentCard(a: Assistant, url: string): Record<string, unknown> {
  return {
    protocolVersion: "0.3.0",
    name: a.name,
    description: a.description ?? `The ${a.graph_id} agent`,
    url,
    preferredTransport: "JSONRPC",
    version: String(a.version),
    capabilities: { streaming: true, pushNotifications: false, stateTransitionHistory: false },
    defaultInputModes: ["text/plain", "application/json"],
    defaultOutputModes: ["text/plain", "application/json"],
    skills: [
      {
        id: `${a.graph_id}-main`,
        name: a.name,
        description: a.description ?? `Runs the ${a.graph_id} agent`,
        tags: [a.graph_id],
      },
    ],
  };
}

const taskOf = (r: InvokeResult, threadId: string, history: A2aMessage[]) =>
  task(
    r.runId,
    threadId,
    taskState(r.error ? "error" : r.status, r.status === "interrupted"),
    r.error ? r.error.message : outputText(r.values),
    history,
  );

/**
 * `/a2a/{assistant_id}`: the Agent2Agent protocol (v0.3 JSON-RPC) for one assistant, behind the
 * project's authentication as every API route. `message/send` runs the assistant on the thread
 * named by `contextId` (a new one otherwise) and answers the task (the run); `message/stream`
 * sends the task, status and artifact updates as SSE; `tasks/get` reads a run back.
 */
export function registerA2aRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext, engine: RunEngine): void {
  registerA2aCards(app, ctx);
  registerA2aRpc(app, ctx, engine);
}

async function assistantOf(ctx: AgentServerContext, c: C, raw: string): Promise<Assistant> {
  const id = resolveAssistantId(ctx, raw);
  return getAssistant(
    ctx,
    id,
    await authorize(ctx, c, "assistants:read", { assistant_id: id }),
    () => new AgentError(404, "Assistant not found"),
  );
}

function registerA2aCards(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  const card = async (c: C, raw: string | undefined) => {
    if (!raw) throw new AgentError(422, "assistant_id is required");
    const a = await assistantOf(ctx, c, raw);
    const url = new URL(c.req.url);
    return rpc(agentCard(a, `${url.origin}/a2a/${a.assistant_id}`));
  };
  app.get("/a2a/:assistant_id/.well-known/agent-card.json", (c) => card(c, c.req.param("assistant_id")));
  app.get("/.well-known/agent-card.json", (c) => card(c, c.req.query("assistant_id")));
}

function registerA2aRpc(app: Hono<AgentEnv>, ctx: AgentServerContext, engine: RunEngine): void {
  app.post("/a2a/:assistant_id", async (c) => {
    let req: { jsonrpc?: unknown; id?: unknown; method?: unknown; params?: unknown };
    try {
      req = ((await (sharedJsonBody(c.req) ?? c.req.json())) ?? {}) as typeof req;
    } catch {
      return rpc(rpcError(null, JSONRPC.PARSE_ERROR, "Parse error: the body is not JSON"));
    }
    if (typeof req !== "object" || req.jsonrpc !== "2.0" || typeof req.method !== "string")
      return rpc(
        rpcError(
          req?.id,
          JSONRPC.INVALID_REQUEST,
          'Invalid request: expected {"jsonrpc": "2.0", "method", "params", "id"}',
        ),
      );
    const id = req.id ?? null;
    let assistant: Assistant;
    try {
      assistant = await assistantOf(ctx, c, c.req.param("assistant_id"));
    } catch (err) {
      if (err instanceof AgentError && err.status === 404)
        return rpc(rpcError(id, JSONRPC.INVALID_PARAMS, `Assistant ${c.req.param("assistant_id")} not found`), 404);
      throw err;
    }
    switch (req.method) {
      case "message/send":
      case "message/stream":
        return sendMessage(ctx, engine, c, id, assistant, req.method, req.params);
      case "tasks/get":
        return getTask(ctx, c, id, assistant, req.params);
      default:
        return rpc(
          rpcError(
            id,
            JSONRPC.METHOD_NOT_FOUND,
            `Method not found: ${req.method} (this server answers message/send, message/stream, tasks/get)`,
          ),
        );
    }
  });
}

/** message/send and message/stream: run the assistant on the context's thread (made if new). */
async function sendMessage(
  ctx: AgentServerContext,
  engine: RunEngine,
  c: C,
  id: unknown,
  assistant: Assistant,
  method: string,
  params: unknown,
): Promise<Response> {
  const message = parseMessage(params);
  if (typeof message === "string") return rpc(rpcError(id, JSONRPC.INVALID_PARAMS, message));
  const input = messageInput(message);
  if (input === null) return rpc(rpcError(id, JSONRPC.INVALID_PARAMS, "params.message has no text or data part"));
  const threadId = message.contextId ?? randomUUID();
  const target = { assistantId: assistant.assistant_id, threadId, input };
  try {
    // The context's thread is made as `POST /threads` makes one (the caller's `threads:create`
    // handler stamps it), so the caller can read it and its tasks back; an existing one is kept.
    const value = {
      thread_id: threadId,
      metadata: { graph_id: assistant.graph_id, assistant_id: assistant.assistant_id },
      if_exists: "do_nothing" as const,
    };
    await createThread(ctx, value, await authorize(ctx, c, "threads:create", value));
    if (method === "message/stream") return streamTask(c, engine, id, target, message);
    const r = await invokeAssistant(engine, c.get("auth"), c.req.raw.headers, target, null, c.req.raw.signal);
    return rpc(rpcResult(id, taskOf(r, threadId, [message])));
  } catch (err) {
    if (err instanceof AgentError) return rpc(rpcError(id, JSONRPC.INVALID_PARAMS, err.message));
    throw err;
  }
}

/** tasks/get: a run read back as a task, if the caller may read its thread. */
async function getTask(
  ctx: AgentServerContext,
  c: C,
  id: unknown,
  assistant: Assistant,
  params: unknown,
): Promise<Response> {
  const taskId = (params as { id?: unknown } | null)?.id;
  if (!isUuid(taskId)) return rpc(rpcError(id, JSONRPC.INVALID_PARAMS, "params.id must be a task id (UUID)"));
  const row = await getRunRow(ctx.db, ctx, taskId);
  const thread =
    row && row.assistant_id === assistant.assistant_id
      ? await findThreadRow(
          ctx.db,
          ctx,
          row.thread_id,
          await authorize(ctx, c, "threads:read", { thread_id: row.thread_id }),
        )
      : undefined;
  // Another user's task reads as missing, as their thread does on the REST routes.
  if (!row || !thread) return rpc(rpcError(id, JSONRPC.TASK_NOT_FOUND, `Task ${taskId} not found`));
  const t = toThread(thread);
  const values = (t.values ?? {}) as Record<string, unknown>;
  const waiting = Array.isArray(t.interrupts)
    ? t.interrupts.length > 0
    : !!t.interrupts && Object.keys(t.interrupts).length > 0;
  const state = taskState(row.status, row.status === "success" && waiting);
  return rpc(
    rpcResult(
      id,
      task(taskId, row.thread_id, state, state === "submitted" || state === "working" ? null : outputText(values)),
    ),
  );
}

/** message/stream: the task once the run exists, a `working` update per graph step, then the artifact and the final status. */
function streamTask(
  c: C,
  engine: RunEngine,
  id: unknown,
  target: { assistantId: string; threadId: string; input: unknown },
  message: A2aMessage,
): Response {
  const encoder = new TextEncoder();
  const stop = new AbortController();
  let guarded: GuardedController<Uint8Array> | null = null;
  const stream = new ReadableStream<Uint8Array>({
    start(controller) {
      const out = (guarded = guardController(controller));
      const send = (result: unknown) =>
        out.enqueue(encoder.encode(`data: ${JSON.stringify(rpcResult(id, result))}\n\n`));
      let taskId = "";
      invokeAssistant(
        engine,
        c.get("auth"),
        c.req.raw.headers,
        target,
        () => void send(statusUpdate(taskId, target.threadId, "working", false)),
        stop.signal,
        (runId) => {
          taskId = runId;
          send(task(runId, target.threadId, "submitted", null, [message]));
        },
      ).then(
        (r) => {
          const state = taskState(r.error ? "error" : r.status, r.status === "interrupted");
          const text = r.error ? r.error.message : outputText(r.values);
          if (state === "completed") send(artifactUpdate(r.runId, target.threadId, text));
          send(statusUpdate(r.runId, target.threadId, state, true, state === "completed" ? undefined : text));
          out.close();
        },
        (err: unknown) => {
          // A refused run (busy thread, another user's thread) is a JSON-RPC error on this stream only.
          out.enqueue(
            encoder.encode(
              `data: ${JSON.stringify(rpcError(id, err instanceof AgentError ? JSONRPC.INVALID_PARAMS : JSONRPC.INTERNAL, err instanceof Error ? err.message : String(err)))}\n\n`,
            ),
          );
          out.close();
        },
      );
    },
    cancel() {
      guarded?.cancelled();
      stop.abort();
    },
  });
  return new Response(stream, {
    headers: { ...CORS_HEADERS, "cache-control": "no-cache", "content-type": "text/event-stream" },
  });
}
