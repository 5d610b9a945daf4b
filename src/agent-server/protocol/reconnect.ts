import type { ErrorCode } from "./events.ts";
import type { EventFilter } from "./filters.ts";
import { filterOfId } from "./subscription-ids.ts";

/** What a thread's log knows that a reconnect needs. */
export interface ReconnectView {
  /** The seq before each run's first event, by run id (runs this log has carried). */
  runStarts: ReadonlyMap<string, number>;
  /** Subscriptions made on this thread's sockets here, by id (they outlive their socket); others' ids carry their filter. */
  subscriptions: ReadonlyMap<string, EventFilter>;
  /** The oldest seq still kept (later ones are all kept), and the newest. */
  firstKeptSeq: number;
  lastSeq: number;
}

export type ReconnectPlan =
  { error: ErrorCode; message: string } | { restore: Array<[string, EventFilter]>; after: number; complete: boolean };

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);

/**
 * `subscription.reconnect` on a new WebSocket (pure: table-tested): which subscriptions come back,
 * and the seq after which their missed events are replayed — `last_event_id` when given, else the
 * run's start. `complete` is false when some missed events are no longer kept (the client should
 * read the state again). The protocol's counterpart of an SSE stream reopened with `since`.
 */
export function planReconnect(params: unknown, view: ReconnectView): ReconnectPlan {
  const p = isRecord(params) ? params : {};
  if (typeof p.run_id !== "string" || !p.run_id)
    return { error: "invalid_argument", message: "subscription.reconnect requires a run_id." };
  const runStart = view.runStarts.get(p.run_id);
  if (runStart === undefined) return { error: "no_such_run", message: `Unknown run on this thread: ${p.run_id}` };
  let after = runStart;
  if (p.last_event_id !== undefined) {
    const s = typeof p.last_event_id === "string" && /^\d{1,15}$/.test(p.last_event_id) ? Number(p.last_event_id) : NaN;
    if (!Number.isSafeInteger(s) || s > view.lastSeq)
      return { error: "invalid_argument", message: "last_event_id must be the event_id of an event this thread sent." };
    after = s;
  }
  const ids = p.subscriptions ?? [];
  if (!Array.isArray(ids) || !ids.every((i) => typeof i === "string"))
    return { error: "invalid_argument", message: "subscriptions must be an array of subscription ids." };
  // A subscription made on another replica: its id carries its filter.
  const filterOf = (id: string) => view.subscriptions.get(id) ?? filterOfId(id);
  const unknown = (ids as string[]).filter((id) => !filterOf(id));
  if (unknown.length) return { error: "no_such_subscription", message: `Unknown subscription: ${unknown.join(", ")}` };
  const restore = [...new Set(ids as string[])].map((id) => [id, filterOf(id)!] as [string, EventFilter]);
  return { restore, after, complete: after + 1 >= view.firstKeptSeq };
}
