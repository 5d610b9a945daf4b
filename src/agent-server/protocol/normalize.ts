import type { EventBody } from "./events.ts";

/**
 * Turning the run's source events into protocol events: LangGraph's own protocol events
 * (`streamEvents` v3) mostly pass through; the thread layer owns the root lifecycle, lifts
 * interrupts out of state into `input.requested`, and gives state messages the protocol's shape.
 */

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

const MESSAGE_TYPES = new Set(["human", "user", "ai", "assistant", "system", "tool", "function", "remove"]);
const messageType = (t: unknown) => (t === "assistant" ? "ai" : t === "user" ? "human" : t);

function normalizeToolCalls(raw: unknown): { valid: unknown[]; invalid: unknown[] } {
  const valid: unknown[] = [];
  const invalid: unknown[] = [];
  for (const tc of Array.isArray(raw) ? raw : []) {
    if (!isRecord(tc)) continue;
    const fn = isRecord(tc.function) ? tc.function : undefined;
    const name = typeof tc.name === "string" ? tc.name : typeof fn?.name === "string" ? fn.name : undefined;
    const id = typeof tc.id === "string" ? tc.id : undefined;
    let args = tc.args ?? fn?.arguments ?? {};
    if (typeof args === "string") {
      try {
        args = args.trim() ? JSON.parse(args) : {};
      } catch {
        // Arguments that are not JSON make an invalid tool call, as the model produced them.
        invalid.push({
          ...(id ? { id } : {}),
          ...(name ? { name } : {}),
          args,
          error: "Malformed args.",
          type: "invalid_tool_call",
        });
        continue;
      }
    }
    if (!name) invalid.push({ ...(id ? { id } : {}), error: "Incomplete tool call.", type: "invalid_tool_call" });
    else valid.push({ ...(id ? { id } : {}), name, args, type: "tool_call" });
  }
  return { valid, invalid };
}

/** A state message in the protocol's shape: only the fields the protocol names, empty ones left out. */
export function protocolMessage(m: Record<string, unknown>): Record<string, unknown> {
  const type = messageType(m.type);
  const out: Record<string, unknown> = { type, content: "content" in m ? m.content : "" };
  if (typeof m.id === "string") out.id = m.id;
  if (typeof m.name === "string") out.name = m.name;
  if (isRecord(m.response_metadata) && Object.keys(m.response_metadata).length)
    out.response_metadata = m.response_metadata;
  // `example: false` is every message's default (Wharf's wire dicts spell it out): left out, as the reference does.
  if ((type === "ai" || type === "human") && m.example === true) out.example = true;
  if (type === "tool") {
    if (typeof m.tool_call_id === "string") out.tool_call_id = m.tool_call_id;
    if (m.status === "success" || m.status === "error") out.status = m.status;
    if ("artifact" in m && m.artifact != null) out.artifact = m.artifact;
  }
  if (type === "ai") {
    const kwargs = isRecord(m.additional_kwargs) ? m.additional_kwargs : {};
    const raw = Array.isArray(m.tool_calls) && m.tool_calls.length ? m.tool_calls : kwargs.tool_calls;
    const { valid, invalid } = normalizeToolCalls(raw);
    const given = Array.isArray(m.invalid_tool_calls) && m.invalid_tool_calls.length ? m.invalid_tool_calls : invalid;
    if (valid.length) out.tool_calls = valid;
    if (given.length) out.invalid_tool_calls = given;
  }
  return out;
}

const isMessage = (v: unknown): v is Record<string, unknown> =>
  isRecord(v) && MESSAGE_TYPES.has(messageType(v.type) as string);

/** A state payload with its messages in the protocol's shape and without `__interrupt__`. */
export function protocolState(value: unknown, depth = 0): unknown {
  if (depth > 32) return value;
  if (Array.isArray(value)) return value.map((v) => (isMessage(v) ? protocolMessage(v) : protocolState(v, depth + 1)));
  if (!isRecord(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(value)) {
    if (k === "__interrupt__") continue;
    out[k] =
      k === "messages" && Array.isArray(v)
        ? v.map((m) => (isMessage(m) ? protocolMessage(m) : m))
        : protocolState(v, depth + 1);
  }
  return out;
}

/** The interrupts of a state chunk or an `__interrupt__` update, as `input.requested` payloads. */
export function inputRequests(value: unknown): Array<{ interrupt_id: string; payload: unknown }> {
  const list = Array.isArray(value)
    ? value
    : isRecord(value) && Array.isArray(value.__interrupt__)
      ? value.__interrupt__
      : [];
  return list.flatMap((e: unknown) =>
    isRecord(e) && typeof e.id === "string" ? [{ interrupt_id: e.id, payload: e.value }] : [],
  );
}

/** Per-run memory of the conversion: interrupts already announced are not announced twice. */
export interface ConvertState {
  announced: Set<string>;
}

function requested(ns: string[], value: unknown, state: ConvertState): EventBody[] {
  const out: EventBody[] = [];
  for (const r of inputRequests(value)) {
    if (state.announced.has(r.interrupt_id)) continue;
    state.announced.add(r.interrupt_id);
    out.push({ method: "input.requested", namespace: ns, data: r });
  }
  return out;
}

/** One LangGraph protocol event (as the run published it) → the events the thread sends. */
export function convertProtocolEvent(src: EventBody, state: ConvertState): EventBody[] {
  const ns = src.namespace;
  switch (src.method) {
    case "lifecycle":
      // The root's lifecycle comes from the run's own status (queued, ended, interrupted).
      return ns.length === 0 ? [] : [src];
    case "values": {
      const out = requested(ns, src.data, state);
      const values = protocolState(src.data);
      if (!isRecord(values) || Object.keys(values).length > 0)
        out.push({ method: "values", namespace: ns, data: values });
      return out;
    }
    case "updates": {
      const d = isRecord(src.data) ? src.data : {};
      const node = typeof d.node === "string" ? d.node : src.node;
      if (node === "__interrupt__") return requested(ns, d.values, state);
      return [
        {
          method: "updates",
          namespace: ns,
          ...(node ? { node } : {}),
          data: protocolState(isRecord(d.values) ? d.values : { value: d.values }),
        },
      ];
    }
    case "messages":
    case "tools":
      // Only updates name their node on the wire (the reference server's framing).
      return [{ method: src.method, namespace: ns, data: src.data }];
    case "custom":
    case "checkpoints":
    case "tasks":
      return [src];
    default:
      if (src.method.startsWith("custom:") && src.method.length > 7)
        return [{ method: "custom", namespace: ns, data: { name: src.method.slice(7), payload: src.data } }];
      // An event kind this server does not know yet reaches `custom` subscribers under its name.
      return [{ method: "custom", namespace: ns, data: { name: src.method, payload: src.data } }];
  }
}

/**
 * An event of a run that streamed the classic stream modes (a Python graph): `values`,
 * `updates`, `custom` (named `mode|ns…` for subgraphs) become their protocol events.
 */
export function convertClassicEvent(event: string, data: unknown, state: ConvertState): EventBody[] {
  const [mode, ...ns] = event.split("|");
  if (mode === "values") return convertProtocolEvent({ method: "values", namespace: ns, data }, state);
  if (mode === "updates" && isRecord(data)) {
    return Object.entries(data).flatMap(([node, values]) =>
      convertProtocolEvent({ method: "updates", namespace: ns, data: { node, values } }, state),
    );
  }
  if (mode === "custom") return [{ method: "custom", namespace: ns, data: { payload: data } }];
  return [];
}

/** The root lifecycle status for a run's status. */
export function lifecycleOf(status: string): "running" | "completed" | "failed" | "interrupted" {
  if (status === "success") return "completed";
  if (status === "error") return "failed";
  if (status === "interrupted") return "interrupted";
  return "running";
}
