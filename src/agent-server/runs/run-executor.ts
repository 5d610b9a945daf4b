import { Command, createGraphRunStream, isGraphDrained, Send, STREAM_EVENTS_V3_MODES } from "@langchain/langgraph";
import type { RunnableGraph } from "../project/graphs.ts";
import type { RunChannel } from "./run-channel.ts";
import type { RunKwargs } from "./runs.ts";
import type { ThreadStatus } from "../storage/threads.ts";
import { toPlain } from "../wire.ts";
import { ServerEvents } from "./server-events.ts";

export interface RunOutcome {
  status: "success" | "error" | "interrupted";
  threadStatus: ThreadStatus;
  /** The final state as `/runs/wait` returns it (with `__interrupt__` when the graph paused). */
  values?: unknown;
  /** `/runs/wait` answers the state beside `__interrupt__` (Python graphs), not the interrupt alone. */
  stateWithInterrupt?: boolean;
  /** Thread interrupts, keyed by task id (stateful runs). */
  interrupts?: Record<string, unknown[]>;
  error?: { error: string; message: string };
  /** Stopped at a superstep boundary (`RunControl.requestDrain`), its checkpoint saved: the run is handed back, not ended. */
  drained?: boolean;
  /** Stopped because another replica's attempt owns the run: nothing is recorded from here. */
  fenced?: boolean;
}

/** The channel event name under which a protocol run publishes LangGraph's protocol events. */
export const PROTOCOL_EVENT = "protocol";

interface ProtocolSourceEvent {
  method: string;
  params: { namespace: string[]; node?: string; data: unknown };
}

/**
 * `graph.streamEvents(input, {version: "v3"})`, spelled with the library's public parts: that
 * method is private-field based and refuses the per-checkpointer variants runs execute on
 * (objects created from the loaded graph), so the same stream and transformers are set up here.
 */
function protocolEvents(
  graph: RunnableGraph,
  input: unknown,
  options: Record<string, unknown>,
): AsyncIterable<ProtocolSourceEvent> {
  const source = graph.stream(input, {
    ...options,
    version: "v3",
    streamMode: STREAM_EVENTS_V3_MODES,
    subgraphs: true,
  } as never);
  const transformers = (graph as { streamTransformers?: unknown[] }).streamTransformers ?? [];
  const chunks = {
    async *[Symbol.asyncIterator]() {
      for await (const chunk of await source) yield chunk;
    },
  };
  return createGraphRunStream(chunks as never, transformers as never) as unknown as AsyncIterable<ProtocolSourceEvent>;
}

export function toCommand(c: NonNullable<RunKwargs["command"]>): Command {
  const toSend = (g: unknown): unknown =>
    g && typeof g === "object" && "node" in (g as Record<string, unknown>)
      ? new Send((g as { node: string }).node, (g as { input?: unknown }).input)
      : g;
  const goto = Array.isArray(c.goto) ? c.goto.map(toSend) : c.goto != null ? toSend(c.goto) : undefined;
  return new Command({ update: c.update as never, resume: c.resume, goto: goto as never });
}

export function serializeError(err: unknown): { error: string; message: string } {
  if (err instanceof Error)
    return { error: err.name && err.name !== "Error" ? err.name : "Error", message: err.message };
  return { error: "Error", message: String(err) };
}

/** The stream modes to ask LangGraph for, given what the client asked to receive. */
export function libraryModes(userModes: string[], wantValues: boolean): string[] {
  const modes = new Set(userModes.filter((m) => m !== "events" && m !== "messages-tuple" && m !== "messages"));
  if (userModes.includes("messages-tuple") || userModes.includes("messages")) modes.add("messages");
  if (userModes.includes("messages") || wantValues) modes.add("values");
  return [...modes];
}

/**
 * Runs one graph execution and publishes its chunks to the run's channel under the event names of
 * the LangGraph server. Uses `graph.stream` (cheap) unless the client asked for `events`, which
 * needs `streamEvents`.
 */
export async function executeGraph(
  graph: RunnableGraph,
  kwargs: RunKwargs,
  runConfig: Record<string, unknown>,
  channel: RunChannel,
  signal: AbortSignal,
  stateful: boolean,
): Promise<RunOutcome> {
  const input = kwargs.command != null ? toCommand(kwargs.command) : (kwargs.input ?? null);
  const options: Record<string, unknown> = {
    ...runConfig,
    streamMode: libraryModes(kwargs.stream_mode, !stateful),
    subgraphs: kwargs.subgraphs,
    signal,
    interruptBefore: kwargs.interrupt_before ?? undefined,
    interruptAfter: kwargs.interrupt_after ?? undefined,
  };
  if (kwargs.durability) options.durability = kwargs.durability;
  const events = new ServerEvents(kwargs, channel);
  try {
    await pump(graph, input, options, kwargs, events, channel);
  } catch (err) {
    if (signal.aborted) throw err;
    if (isGraphDrained(err)) return { status: "interrupted", threadStatus: "busy", drained: true };
    const error = serializeError(err);
    channel.push("error", error);
    return { status: "error", threadStatus: "error", values: { __error__: error }, error };
  }
  if (stateful) return stateOutcome(graph, runConfig);
  const values = (events.lastValues ?? {}) as Record<string, unknown>;
  return {
    status: "success",
    threadStatus: "idle",
    values: events.interrupt ? { ...values, __interrupt__: events.interrupt } : values,
  };
}

/** Streams the graph in the way the run asked for, its chunks published through `events`. */
async function pump(
  graph: RunnableGraph,
  input: unknown,
  options: Record<string, unknown>,
  kwargs: RunKwargs,
  events: ServerEvents,
  channel: RunChannel,
): Promise<void> {
  const subgraphs = kwargs.subgraphs;
  if (kwargs.protocol) {
    // The event-based protocol: LangGraph's own protocol events (`streamEvents` v3), framed by
    // the protocol layer; the values of the root namespace still make the run's outcome.
    for await (const ev of protocolEvents(graph, input, options)) {
      const ns = ev.params.namespace;
      if (ev.method === "values" && ns.length === 0) events.topValues(ev.params.data);
      channel.push(PROTOCOL_EVENT, { method: ev.method, namespace: ns, node: ev.params.node, data: ev.params.data });
    }
  } else if (kwargs.stream_mode.includes("events")) {
    const runId = options.runId;
    for await (const ev of graph.streamEvents(input, { ...options, version: "v2" })) {
      if (ev.tags?.includes("langsmith:hidden")) continue;
      if (ev.event === "on_chain_stream" && (subgraphs || ev.run_id === runId)) {
        // The graph's own stream chunks become their modes' events, not `events` (as there).
        const chunk = ev.data.chunk as unknown[];
        const [ns, mode, data] = (subgraphs ? chunk : [null, ...chunk]) as [string[] | null, string, unknown];
        events.emit(mode, ns, data);
      } else channel.push("events", ev);
    }
  } else {
    for await (const chunk of await graph.stream(input, options)) {
      const c = chunk as unknown[];
      if (subgraphs) events.emit(c[1] as string, c[0] as string[], c[2]);
      else events.emit(c[0] as string, null, c[1]);
    }
  }
}

/** A thread run's outcome: the thread's state after it, with the interrupts it paused on. */
async function stateOutcome(graph: RunnableGraph, runConfig: Record<string, unknown>): Promise<RunOutcome> {
  const state = await graph.getState({
    configurable: { thread_id: (runConfig.configurable as Record<string, unknown>).thread_id },
  });
  const interrupts: Record<string, unknown[]> = {};
  const flat: unknown[] = [];
  for (const t of state.tasks ?? []) {
    if (t.interrupts?.length) {
      interrupts[t.id] = toPlain(t.interrupts);
      flat.push(...(t.interrupts as unknown[]));
    }
  }
  const values = (state.values ?? {}) as Record<string, unknown>;
  const paused = (state.next?.length ?? 0) > 0;
  return {
    status: "success",
    threadStatus: paused ? "interrupted" : "idle",
    values: flat.length ? { ...values, __interrupt__: flat } : values,
    interrupts,
  };
}
