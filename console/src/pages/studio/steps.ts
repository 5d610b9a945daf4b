/** Thread history → the Studio's steps, and what a person types → a resume or a Command. */

export interface Checkpoint {
  thread_id?: string;
  checkpoint_ns?: string;
  checkpoint_id: string;
}
export interface ThreadStateLike {
  values: unknown;
  next: string[];
  checkpoint: Checkpoint;
  parent_checkpoint?: Checkpoint | null;
  metadata?: { step?: number; source?: string; writes?: Record<string, unknown> | null } | null;
  created_at?: string | null;
  tasks?: Array<{ id: string; name: string; interrupts?: Array<{ value?: unknown }>; error?: string | null }>;
}

export interface Step {
  checkpointId: string;
  parentId: string | null;
  step: number;
  source: string;
  /** Nodes whose writes made this checkpoint (`metadata.writes`, or the previous step's `next`). */
  wrote: string[];
  /** What changed: `metadata.writes` when the server keeps them, else the keys that differ from the previous step. */
  writes: unknown;
  next: string[];
  values: unknown;
  interrupts: unknown[];
  at: string | null;
}

/**
 * History (newest first, as the API answers) → steps oldest first. A step's writes are the
 * checkpoint's `metadata.writes` when the server keeps them (LangGraph JS no longer does); otherwise
 * the nodes are the parent's `next` and the writes the values that changed since the parent.
 */
export function stepsOf(history: ThreadStateLike[]): Step[] {
  const byId = new Map(history.map((s) => [s.checkpoint.checkpoint_id, s]));
  return [...history].reverse().map((s) => {
    const kept = s.metadata?.writes ?? null;
    const parent = s.parent_checkpoint ? byId.get(s.parent_checkpoint.checkpoint_id) : undefined;
    const source = s.metadata?.source ?? "";
    const wrote =
      kept && typeof kept === "object"
        ? Object.keys(kept)
        : source === "input"
          ? ["input"]
          : source === "update"
            ? ["edit"]
            : (parent?.next ?? []);
    const changed = parent ? changedKeys(parent.values, s.values) : [];
    const writes =
      kept ??
      (changed.length ? Object.fromEntries(changed.map((k) => [k, (s.values as Record<string, unknown>)[k]])) : null);
    return {
      checkpointId: s.checkpoint.checkpoint_id,
      parentId: s.parent_checkpoint?.checkpoint_id ?? null,
      step: s.metadata?.step ?? -1,
      source,
      wrote,
      writes,
      next: s.next ?? [],
      values: s.values,
      interrupts: (s.tasks ?? []).flatMap((t) => (t.interrupts ?? []).map((i) => i.value)),
      at: s.created_at ?? null,
    };
  });
}

/** Top-level keys whose value differs from the parent step's: the step's writes when the server kept none. */
export function changedKeys(before: unknown, after: unknown): string[] {
  const a = (before && typeof before === "object" ? before : {}) as Record<string, unknown>;
  const b = (after && typeof after === "object" ? after : {}) as Record<string, unknown>;
  return Object.keys(b).filter((k) => JSON.stringify(a[k]) !== JSON.stringify(b[k]));
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string };

/**
 * The part of an edited state to send: only the keys the person changed, since a channel with a
 * reducer (a list that appends) would otherwise get its whole value again.
 */
export function editedPart(before: unknown, edited: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(changedKeys(before, edited).map((k) => [k, edited[k]]));
}

/** A resume value: JSON when it parses, the text itself otherwise (as Studio does). */
export function resumeValue(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

const COMMAND_KEYS = new Set(["resume", "update", "goto"]);

/** A `Command` typed as JSON: an object with at least one of `resume`, `update`, `goto` and nothing else. */
export function parseCommand(text: string): Parsed<{ resume?: unknown; update?: unknown; goto?: unknown }> {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    return { ok: false, error: 'A command is a JSON object, for example {"resume": "yes"} or {"goto": "publish"}.' };
  }
  if (!v || typeof v !== "object" || Array.isArray(v))
    return { ok: false, error: "A command is a JSON object with resume, update or goto." };
  const keys = Object.keys(v);
  const unknown = keys.filter((k) => !COMMAND_KEYS.has(k));
  if (unknown.length)
    return { ok: false, error: `A command has only resume, update and goto (not ${unknown.join(", ")}).` };
  if (!keys.length) return { ok: false, error: "A command needs resume, update or goto." };
  return { ok: true, value: v as { resume?: unknown; update?: unknown; goto?: unknown } };
}

/** A JSON object typed in an editor (state values, configuration, context). */
export function parseObject(text: string, what: string): Parsed<Record<string, unknown>> {
  if (!text.trim()) return { ok: true, value: {} };
  try {
    const v = JSON.parse(text);
    if (v && typeof v === "object" && !Array.isArray(v)) return { ok: true, value: v as Record<string, unknown> };
    return { ok: false, error: `${what} must be a JSON object ({ … }).` };
  } catch (e) {
    return { ok: false, error: `${what} is not valid JSON: ${(e as Error).message}` };
  }
}

/**
 * An editor's starting text for a JSON Schema: each property with its default or an empty value of
 * its type. Untyped properties are left out (a `null` would overwrite a thread's state); the page
 * names them beside the editor.
 */
export function skeletonFor(schema: unknown): Record<string, unknown> {
  const props =
    (schema as { properties?: Record<string, { type?: string | string[]; default?: unknown }> } | null)?.properties ??
    {};
  const empty: Record<string, unknown> = { string: "", number: 0, integer: 0, boolean: false, array: [], object: {} };
  const out: Record<string, unknown> = {};
  for (const [k, p] of Object.entries(props)) {
    const type = Array.isArray(p.type) ? p.type.find((t) => t !== "null") : p.type;
    if (p.default !== undefined) out[k] = p.default;
    else if (type && type in empty) out[k] = empty[type];
  }
  return out;
}

/** The property names of a JSON Schema, for a hint beside an editor. */
export const schemaFields = (schema: unknown): string[] =>
  Object.keys((schema as { properties?: object } | null)?.properties ?? {});
