import type { EventBody, ProtocolEvent } from "./events.ts";
import type { EventFilter } from "./filters.ts";
import { subscriptionId } from "./subscription-ids.ts";

/** The run (and its assistant) whose pump appends an event. */
export interface LogOrigin {
  runId: string;
  assistantId: string | null;
}

/** An event as a shared log stores it: its JSON (`method`, `params`), numbered by the store. */
export interface SharedEntry {
  seq: number;
  body: string;
  runId: string;
  assistantId: string;
}

/** Where a shared log's appends go (replicas: Redis, see shared-log.ts); they come back through `ingest`. */
export interface LogSink {
  push(body: string, origin: LogOrigin | undefined): void;
}

/** Events a thread keeps for replay (`since`, late subscribers); older ones fall off the front. */
const MAX_EVENTS = 10_000;
/** Runs and WebSocket subscriptions a thread remembers for `subscription.reconnect`; the oldest are forgotten. */
const MAX_REMEMBERED = 256;

/** An event's params as the log keeps them: stamped with the time it was appended. */
function stamped(body: EventBody): ProtocolEvent["params"] {
  return {
    namespace: body.namespace,
    timestamp: Date.now(),
    ...(body.node ? { node: body.node } : {}),
    data: body.data,
  };
}

/** An event as a shared log stores it (`method`, stamped `params`). */
export function eventJson(body: EventBody): string {
  return JSON.stringify({ method: body.method, params: stamped(body) });
}

/** Sets an entry, forgetting the oldest past the bound (a Map iterates in insertion order). */
function remember<V>(map: Map<string, V>, key: string, value: V): void {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_REMEMBERED) map.delete(map.keys().next().value!);
}

/**
 * The protocol events of one thread, numbered across its runs (`seq` starts at 1 and never
 * repeats while the log lives), kept for replay, with a wake-up for followers. Nothing polls.
 */
export class ThreadLog {
  private seq = 0;
  readonly events: ProtocolEvent[] = [];
  private waiters: Array<() => void> = [];
  /** The assistant the thread's protocol runs use (a thread is bound to one, as on the reference server). */
  assistantId: string | null = null;
  currentRunId: string | null = null;
  /** The last seq before the current run's first event (a new WebSocket subscription replays after it). */
  runStartSeq = 0;
  /** The seq before each run's first event, by run id (`subscription.reconnect` replays from there). */
  readonly runStarts = new Map<string, number>();
  /** WebSocket subscriptions by id: they outlive their socket, so a new one may restore them. */
  readonly subscriptions = new Map<string, EventFilter>();
  /** The namespaces seen, with their last lifecycle status and graph name (`agent.getTree`). */
  readonly namespaces = new Map<string, { namespace: string[]; status: string; graphName: string }>();
  /** Runs are pumped into the log one after the other, in the order they were started. */
  pumping: Promise<void> = Promise.resolve();
  /** Consumers attached now (SSE connections, WebSockets): a log nobody follows may be dropped. */
  followers = 0;
  lastUsed = Date.now();
  /** Replicas: appends go to the shared log, and events come back from it (`ingest`); null in one process. */
  sink: LogSink | null = null;
  /** Resolves once a shared log's kept events are here (at once in one process). */
  ready: Promise<void> = Promise.resolve();
  /** Stops mirroring a shared log (the log is dropped); nothing to stop in one process. */
  detach: () => void = () => undefined;
  /** The run of the last event ingested (a new one marks where that run's events begin). */
  private lastRunId = "";
  /** Runs with events in the shared log, as ingested (a run's pump waits for the announcement of its run). */
  private readonly ingestedRuns = new Map<string, true>();

  get lastSeq(): number {
    return this.seq;
  }

  /** The oldest seq still kept (every later one is). */
  get firstKeptSeq(): number {
    return this.events[0]?.seq ?? this.seq + 1;
  }

  /** Notes where a run's events begin (provisionally when queued, exactly when its pump starts). */
  noteRun(runId: string, startSeq: number): void {
    remember(this.runStarts, runId, startSeq);
  }

  /** Registers a WebSocket subscription under an id unique on this thread (it carries its filter). */
  addSubscription(filter: EventFilter): string {
    const id = subscriptionId(filter);
    remember(this.subscriptions, id, filter);
    return id;
  }

  /** Adds an event; a shared log numbers it in the store, and it arrives here through `ingest`. */
  append(body: EventBody, origin?: LogOrigin): void {
    if (this.sink) {
      this.sink.push(eventJson(body), origin);
      return;
    }
    const params = stamped(body);
    this.seq += 1;
    this.keep({ type: "event", event_id: String(this.seq), seq: this.seq, method: body.method, params });
    this.wake();
  }

  /**
   * Events of a shared log, as the store numbered them (any replica may have appended them). What
   * is already here is skipped; after a hole (the store lost or trimmed events) only what follows
   * it is kept, so the kept events stay contiguous. A run's first event marks where it begins.
   */
  ingest(entries: readonly SharedEntry[]): void {
    let added = false;
    for (const e of entries) {
      if (e.seq <= this.seq) continue;
      let parsed: Pick<ProtocolEvent, "method" | "params">;
      try {
        parsed = JSON.parse(e.body) as Pick<ProtocolEvent, "method" | "params">;
      } catch {
        continue; // not an entry Wharf wrote
      }
      if (e.seq !== this.seq + 1) this.events.length = 0;
      this.seq = e.seq;
      if (e.runId && e.runId !== this.lastRunId) {
        this.runStartSeq = e.seq - 1;
        this.noteRun(e.runId, e.seq - 1);
        this.currentRunId = e.runId;
        remember(this.ingestedRuns, e.runId, true);
      }
      if (e.runId) this.lastRunId = e.runId;
      if (e.assistantId) this.assistantId = e.assistantId;
      this.keep({ type: "event", event_id: String(e.seq), seq: e.seq, method: parsed.method, params: parsed.params });
      added = true;
    }
    if (added) this.wake();
  }

  private keep(event: ProtocolEvent): void {
    if (event.method === "lifecycle")
      this.track({ method: event.method, namespace: event.params.namespace, data: event.params.data });
    this.events.push(event);
    if (this.events.length > MAX_EVENTS) this.events.splice(0, this.events.length - MAX_EVENTS);
    this.lastUsed = Date.now();
  }

  /** Whether the shared log holds events of this run (its announcement came back through `ingest`). */
  hasRun(runId: string): boolean {
    return this.ingestedRuns.has(runId);
  }

  /**
   * Resolves once the thread's root run is not `running` in this log, or after `ms`. Replicas: a
   * run's pump may be on another replica, still appending the previous run's last events; the next
   * run's announcement waits for them so two runs' events do not interleave.
   */
  rootSettled(ms: number, signal: AbortSignal): Promise<void> {
    return this.until(() => this.namespaces.get("[]")?.status !== "running", ms, signal);
  }

  /** Resolves once `done()` holds after an event (or at once), or after `ms`, or when `signal` aborts. */
  async until(done: () => boolean, ms: number, signal: AbortSignal): Promise<void> {
    const deadline = Date.now() + ms;
    while (!done() && Date.now() < deadline && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const t = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => {
          clearTimeout(t);
          resolve();
        });
      });
    }
  }

  private track(body: EventBody): void {
    const d = body.data as { event?: string; graph_name?: string };
    const key = JSON.stringify(body.namespace);
    const prev = this.namespaces.get(key);
    this.namespaces.set(key, {
      namespace: body.namespace,
      status: d.event ?? prev?.status ?? "started",
      graphName: d.graph_name ?? prev?.graphName ?? "root",
    });
  }

  /** Wakes followers without an event (their consumer went away, or the server stops). */
  wake(): void {
    const w = this.waiters;
    this.waiters = [];
    for (const f of w) f();
  }

  /** Events after `since` (a seq; 0 for all kept), as they come, until `signal` aborts. */
  async *follow(since: number, signal: AbortSignal): AsyncGenerator<ProtocolEvent> {
    let after = since;
    const onAbort = () => this.wake();
    signal.addEventListener("abort", onAbort, { once: true });
    this.followers += 1;
    try {
      while (!signal.aborted) {
        const first = this.events[0]?.seq ?? this.seq + 1;
        let i = Math.max(0, after + 1 - first);
        while (i < this.events.length) {
          const ev = this.events[i++];
          after = ev.seq;
          yield ev;
          if (signal.aborted) return;
        }
        if (after < this.seq) continue;
        await new Promise<void>((resolve) => this.waiters.push(resolve));
      }
    } finally {
      this.followers -= 1;
      this.lastUsed = Date.now();
      signal.removeEventListener("abort", onAbort);
    }
  }

  /** The agent tree below `namespace`, from the lifecycle events seen. */
  tree(namespace: string[] = []): Record<string, unknown> {
    const here = this.namespaces.get(JSON.stringify(namespace));
    const children = [...this.namespaces.values()]
      .filter((n) => n.namespace.length === namespace.length + 1 && namespace.every((s, i) => n.namespace[i] === s))
      .sort((a, b) => JSON.stringify(a.namespace).localeCompare(JSON.stringify(b.namespace)))
      .map((n) => this.tree(n.namespace));
    return {
      namespace,
      status: here?.status ?? "started",
      graph_name: here?.graphName ?? (namespace.length ? (namespace.at(-1) ?? "").split(":")[0] : "root"),
      ...(children.length ? { children } : {}),
    };
  }
}

/** How long a log nobody follows is kept after its last event (a client reconnecting with `since`). */
const IDLE_KEEP_MS = 10 * 60_000;

/** Replicas: makes a new log a mirror of the thread's shared log (sets its sink, ready and detach). */
export type ShareLog = (threadId: string, log: ThreadLog) => void;

/** The logs of the threads this process serves the protocol for, dropped when idle. */
export class ThreadLogs {
  private readonly logs = new Map<string, ThreadLog>();

  constructor(private readonly share: ShareLog | null = null) {}

  /** The thread's log; on replicas, once its shared events are here. */
  async open(threadId: string): Promise<ThreadLog> {
    const log = this.get(threadId);
    await log.ready;
    return log;
  }

  get(threadId: string): ThreadLog {
    let log = this.logs.get(threadId);
    if (!log) {
      this.sweep();
      log = new ThreadLog();
      this.share?.(threadId, log);
      this.logs.set(threadId, log);
    }
    log.lastUsed = Date.now();
    return log;
  }

  peek(threadId: string): ThreadLog | undefined {
    return this.logs.get(threadId);
  }

  /** Forgets a thread (deleted): its followers end. */
  drop(threadId: string): void {
    const log = this.logs.get(threadId);
    log?.detach();
    log?.wake();
    this.logs.delete(threadId);
  }

  private sweep(): void {
    const now = Date.now();
    for (const [id, log] of this.logs) {
      if (log.followers === 0 && now - log.lastUsed > IDLE_KEEP_MS) {
        log.detach();
        this.logs.delete(id);
      }
    }
  }

  /** Ends every follower (the server stops). */
  close(): void {
    for (const log of this.logs.values()) {
      log.detach();
      log.wake();
    }
  }
}
