/**
 * Run event streams in Redis: key names and ids (pure; table-tested). Wharf numbers a run's events
 * 0, 1, 2…; Redis refuses the id 0-0, so event n is stored as `0-<n+1>`. Explicit ids make a
 * retried append harmless (Redis refuses an id at or below the stream's top) and keep
 * `Last-Event-ID` and thread-stream ids (`<run_id>:<n>`) as they are. The `{…}` hash tag keeps a
 * run's keys in one slot, so the scripts stay valid under Redis Cluster.
 */
export const runStreamKey = (runId: string) => `wharf:{${runId}}:ev`;
export const runAttemptKey = (runId: string) => `wharf:{${runId}}:attempt`;
export const threadRunsKey = (threadId: string) => `wharf:{${threadId}}:runs`;

/** The stream id of event n. */
export const streamId = (n: number): string => `0-${n + 1}`;

/** The event number of a stream id written by `streamId` (null for another shape). */
export function eventNumber(id: string): number | null {
  const m = /^0-(\d+)$/.exec(id);
  return m ? Number(m[1]) - 1 : null;
}

/** One stream entry as XREAD/XRANGE answer it (RESP2): `[id, [field, value, …]]`. */
export type RawEntry = [string, string[]];

export type RunStreamEntry =
  { kind: "event"; n: number; event: string; json: string } | { kind: "end"; n: number; status: string };

/** A run stream entry from its raw form; null when it is not one Wharf writes. */
export function parseRunEntry(raw: RawEntry): RunStreamEntry | null {
  const n = eventNumber(raw[0]);
  if (n === null) return null;
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < raw[1].length; i += 2) f[raw[1][i]] = raw[1][i + 1];
  if (f.end !== undefined) return { kind: "end", n, status: f.end };
  if (f.e === undefined || f.d === undefined) return null;
  return { kind: "event", n, event: f.e, json: f.d };
}

/**
 * What a follower that has seen events up to `after` makes of the next entry: deliver it, skip it
 * (already seen), or stop because entries are missing (Redis lost them: restarted without its data,
 * or trimmed past the follower), so the client gets a clean error rather than a silent hole.
 */
export function nextStep(after: number, entry: RunStreamEntry): "deliver" | "skip" | "gap" {
  if (entry.n <= after) return "skip";
  if (entry.n === after + 1) return "deliver";
  return "gap";
}

/**
 * A thread's event-based protocol log (`/threads/{id}/stream/events`): entry `0-<seq>` is the
 * thread's event `seq` (1, 2, …), so `since` and `event_id` mean the same on every replica.
 */
export const threadEventsKey = (threadId: string) => `wharf:{${threadId}}:proto`;

/** The pump of a run's protocol events into its thread's log: its attempt and how far it got (the thread's slot). */
export const threadPumpKey = (threadId: string, runId: string) => `wharf:{${threadId}}:pump:${runId}`;

/** One protocol event of a thread as stored: its seq, the event's JSON, the run that produced it and the assistant. */
export interface ThreadEventEntry {
  seq: number;
  body: string;
  runId: string;
  assistantId: string;
}

/** A thread protocol entry from its raw form; null when it is not one Wharf writes. */
export function parseThreadEventEntry(raw: RawEntry): ThreadEventEntry | null {
  const m = /^0-(\d+)$/.exec(raw[0]);
  if (!m) return null;
  const f: Record<string, string> = {};
  for (let i = 0; i + 1 < raw[1].length; i += 2) f[raw[1][i]] = raw[1][i + 1];
  if (f.p === undefined) return null;
  return { seq: Number(m[1]), body: f.p, runId: f.r ?? "", assistantId: f.a ?? "" };
}
