import {
  isAIMessage,
  isAIMessageChunk,
  isBaseMessage,
  isToolMessage,
  type AIMessageChunk,
  type BaseMessage,
} from "@langchain/core/messages";

/**
 * Whether a message is a streamed chunk. LangChain's `isBaseMessageChunk` checks the prototype
 * chain, so a chunk made by the project's own copy of `@langchain/core` (the usual case: a project
 * installs its own) reads as a whole message; chunks are the messages that `concat`.
 */
export function isMessageChunk(m: unknown): m is AIMessageChunk {
  return isBaseMessage(m) && typeof (m as { concat?: unknown }).concat === "function";
}

/**
 * A LangChain message as the LangGraph server puts it on the wire: every field present (the
 * interface lists `name`, `id`, `example`, and for AI messages `tool_calls`, `invalid_tool_calls`,
 * `usage_metadata`), absent values as null, in the order the Python server uses.
 */
export function messageToDict(m: BaseMessage): Record<string, unknown> {
  const any = m as unknown as Record<string, unknown>;
  const out: Record<string, unknown> = {
    content: m.content,
    additional_kwargs: m.additional_kwargs ?? {},
    response_metadata: m.response_metadata ?? {},
    type: m.getType(),
    name: m.name ?? null,
    id: m.id ?? null,
  };
  const chunk = isMessageChunk(m);
  if (isAIMessage(m) || isAIMessageChunk(m as never)) {
    out.example = any.example ?? false;
    const ai = m as AIMessageChunk;
    out.tool_calls = ai.tool_calls ?? [];
    out.invalid_tool_calls = ai.invalid_tool_calls ?? [];
    out.usage_metadata = ai.usage_metadata ?? null;
    if (chunk) out.tool_call_chunks = ai.tool_call_chunks ?? [];
  } else if (isToolMessage(m)) {
    out.tool_call_id = m.tool_call_id;
    out.artifact = m.artifact ?? null;
    out.status = m.status ?? "success";
  } else if (out.type === "human") {
    out.example = any.example ?? false;
  } else if (out.type === "remove") {
    return { type: "remove", id: m.id ?? null, content: "", additional_kwargs: {}, response_metadata: {}, name: null };
  }
  return out;
}

// JSON.stringify calls toJSON before the replacer; the holder still has the original object.
function replacer(this: Record<string, unknown>, key: string, value: unknown): unknown {
  const original = this[key];
  if (original !== null && typeof original === "object" && isBaseMessage(original))
    return messageToDict(original as BaseMessage);
  if (typeof value === "bigint") return value.toString();
  return value;
}

/**
 * Messages reachable through plain objects and arrays turned into their wire dicts before
 * stringifying: JSON.stringify would otherwise first run LangChain's costly `toJSON` on each one,
 * only for the replacer to discard it. Other objects are left to JSON.stringify (and the replacer).
 */
function prepare(value: unknown, depth = 0): unknown {
  if (value === null || typeof value !== "object" || depth > 64) return value;
  if (isBaseMessage(value)) return messageToDict(value as BaseMessage);
  if (Array.isArray(value)) return value.map((v) => prepare(v, depth + 1));
  const proto = Object.getPrototypeOf(value);
  if ((proto !== Object.prototype && proto !== null) || typeof (value as { toJSON?: unknown }).toJSON === "function")
    return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) out[k] = prepare(v, depth + 1);
  return out;
}

/** JSON for the wire: messages as dicts; pretty (2 spaces) like the LangGraph server. */
export function toJson(value: unknown, pretty = true): string {
  return JSON.stringify(prepare(value ?? null), replacer, pretty ? 2 : undefined) ?? "null";
}

/** A plain JSON value (messages turned into dicts), for storing or comparing. */
export function toPlain<T = unknown>(value: unknown): T {
  return JSON.parse(toJson(value, false)) as T;
}

/**
 * One server-sent event framed as the LangGraph server does: `event:`, the pretty JSON split over
 * `data:` lines (`json` is already serialised with `toJson`), then `id:` (thread-run streams only), then a blank line.
 */
export function sseFrame(event: string, json: string, id?: string | number): string {
  let out = `event: ${event}\n`;
  for (const line of json.split("\n")) out += `data: ${line}\n`;
  if (id !== undefined) out += `id: ${id}\n`;
  return out + "\n";
}

/** Headers every agent-server response carries (the LangGraph server answers CORS for any origin). */
export const CORS_HEADERS: Record<string, string> = {
  "access-control-allow-origin": "*",
  "access-control-expose-headers": "content-location,x-pagination-total",
};
