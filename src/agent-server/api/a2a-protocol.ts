import { randomUUID } from "node:crypto";

// The A2A (Agent2Agent, v0.3) JSON-RPC shapes this server answers, and the pure mappings between
// them and LangGraph runs: a task is a run, a context is a thread.

export type TaskState = "submitted" | "working" | "input-required" | "completed" | "canceled" | "failed";

export interface A2aPart {
  kind: "text" | "data" | "file";
  text?: string;
  data?: unknown;
}

export interface A2aMessage {
  kind: "message";
  messageId: string;
  role: "user" | "agent";
  parts: A2aPart[];
  contextId?: string;
  taskId?: string;
}

export const JSONRPC = {
  PARSE_ERROR: -32700,
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL: -32603,
  TASK_NOT_FOUND: -32001,
} as const;

export const rpcError = (id: unknown, code: number, message: string) => ({
  jsonrpc: "2.0",
  id: id ?? null,
  error: { code, message },
});
export const rpcResult = (id: unknown, result: unknown) => ({ jsonrpc: "2.0", id, result });

/** A run's status as an A2A task state (a run paused on an interrupt waits for input). */
export function taskState(runStatus: string, interrupted = false): TaskState {
  if (interrupted) return "input-required";
  switch (runStatus) {
    case "pending":
      return "submitted";
    case "running":
      return "working";
    case "success":
      return "completed";
    case "interrupted":
      return "canceled";
    default:
      return "failed";
  }
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (v: unknown): v is string => typeof v === "string" && UUID.test(v);

/**
 * The graph input of a user message: its text parts as one human message (`{messages: [...]}`,
 * what chat graphs take); a message with only a data part hands that object to the graph as it is.
 * Null when the message carries nothing usable.
 */
export function messageInput(message: A2aMessage): unknown {
  const text = message.parts
    .filter((p) => p.kind === "text" && typeof p.text === "string")
    .map((p) => p.text)
    .join("\n");
  if (text) return { messages: [{ role: "human", content: text }] };
  const data = message.parts.find((p) => p.kind === "data" && p.data && typeof p.data === "object");
  return data ? data.data : null;
}

/** Checks `params.message` of message/send and message/stream; the reason it is not one otherwise. */
export function parseMessage(params: unknown): A2aMessage | string {
  const m = (params as { message?: unknown } | null)?.message as Partial<A2aMessage> | undefined;
  if (!m || typeof m !== "object") return "params.message is required";
  if (m.role !== "user") return 'params.message.role must be "user"';
  if (!Array.isArray(m.parts) || m.parts.length === 0) return "params.message.parts must be a non-empty array";
  if (m.contextId !== undefined && !isUuid(m.contextId)) return "params.message.contextId must be a UUID (a thread id)";
  return {
    kind: "message",
    messageId: typeof m.messageId === "string" ? m.messageId : randomUUID(),
    role: "user",
    parts: m.parts as A2aPart[],
    contextId: m.contextId,
    taskId: m.taskId,
  };
}

export function agentMessage(text: string, taskId: string, contextId: string): A2aMessage {
  return {
    kind: "message",
    messageId: randomUUID(),
    role: "agent",
    parts: [{ kind: "text", text }],
    taskId,
    contextId,
  };
}

/** A task as tasks/get and message/send answer it. */
export function task(
  taskId: string,
  contextId: string,
  state: TaskState,
  text: string | null,
  history: A2aMessage[] = [],
): Record<string, unknown> {
  return {
    kind: "task",
    id: taskId,
    contextId,
    status: {
      state,
      timestamp: new Date().toISOString(),
      ...(text !== null && state !== "completed" ? { message: agentMessage(text, taskId, contextId) } : {}),
    },
    artifacts:
      text !== null && state === "completed"
        ? [{ artifactId: `${taskId}-output`, name: "Assistant Response", parts: [{ kind: "text", text }] }]
        : [],
    history,
  };
}

export function statusUpdate(
  taskId: string,
  contextId: string,
  state: TaskState,
  final: boolean,
  text?: string,
): Record<string, unknown> {
  return {
    kind: "status-update",
    taskId,
    contextId,
    final,
    status: {
      state,
      timestamp: new Date().toISOString(),
      ...(text !== undefined ? { message: agentMessage(text, taskId, contextId) } : {}),
    },
  };
}

export function artifactUpdate(taskId: string, contextId: string, text: string): Record<string, unknown> {
  return {
    kind: "artifact-update",
    taskId,
    contextId,
    lastChunk: true,
    artifact: { artifactId: `${taskId}-output`, name: "Assistant Response", parts: [{ kind: "text", text }] },
  };
}
