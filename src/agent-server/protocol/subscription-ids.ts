import crypto from "node:crypto";
import type { EventFilter } from "./filters.ts";

const isStrings = (v: unknown): v is string[] => Array.isArray(v) && v.every((s) => typeof s === "string");

/**
 * A WebSocket subscription's id carries its filter (`sub-<nonce>.<filter as base64url JSON>`), so
 * `subscription.reconnect` restores it on any replica, not only the one that made it. The filter is
 * no secret: whoever holds the id could subscribe with the same filter on the same thread anyway.
 */
export function subscriptionId(filter: EventFilter): string {
  const f = { c: [...filter.channels], n: filter.namespaces, d: filter.depth };
  return `sub-${crypto.randomBytes(6).toString("base64url")}.${Buffer.from(JSON.stringify(f)).toString("base64url")}`;
}

/** The filter a subscription id carries (null for an id this server did not make). */
export function filterOfId(id: string): EventFilter | null {
  const m = /^sub-[\w-]{8}\.([\w-]{1,4096})$/.exec(id);
  if (!m) return null;
  let f: { c?: unknown; n?: unknown; d?: unknown };
  try {
    f = JSON.parse(Buffer.from(m[1], "base64url").toString("utf8")) as typeof f;
  } catch {
    return null; // not JSON: not an id made here
  }
  if (!isStrings(f.c) || !f.c.length) return null;
  if (f.n !== undefined && !(Array.isArray(f.n) && f.n.every(isStrings))) return null;
  if (f.d !== undefined && !(typeof f.d === "number" && Number.isInteger(f.d) && f.d >= 0)) return null;
  return { channels: new Set(f.c), ...(f.n ? { namespaces: f.n } : {}), ...(f.d !== undefined ? { depth: f.d } : {}) };
}
