import type { AuditEvent } from "./audit-log.ts";

/**
 * Refused and failed requests, as they happen, for whoever runs the process they came from: a
 * deployment's build step fails at once naming the decision instead of its package manager
 * retrying into a timeout, and its log says which setting would allow the request.
 */
export type RefusalListener = (event: AuditEvent) => void;

const listeners = new Map<string, Set<RefusalListener>>();

/** Calls `fn` for every request of `targetId` the proxy refuses or cannot complete; returns the unsubscribe. */
export function watchEgressRefusals(targetId: string, fn: RefusalListener): () => void {
  let set = listeners.get(targetId);
  if (!set) listeners.set(targetId, (set = new Set()));
  set.add(fn);
  return () => {
    set.delete(fn);
    if (set.size === 0 && listeners.get(targetId) === set) listeners.delete(targetId);
  };
}

/**
 * Like `watchEgressRefusals`, but once per (host, port, reason): a retrying client, or many paths
 * of one host, repeat the same refusal. At most `max` distinct ones (a client looping over many
 * hosts must not flood a log); `first` marks the very first.
 */
export function watchDistinctRefusals(
  targetId: string,
  fn: (event: AuditEvent, first: boolean) => void,
  max = 20,
): () => void {
  const seen = new Set<string>();
  return watchEgressRefusals(targetId, (e) => {
    const key = `${e.host}:${e.port}|${e.reason ?? ""}`;
    if (seen.has(key) || seen.size >= max) return;
    seen.add(key);
    fn(e, seen.size === 1);
  });
}

export function notifyRefusal(event: AuditEvent): void {
  if (event.kind !== "block") return;
  const set = listeners.get(event.sandboxId);
  if (!set) return;
  for (const fn of set) {
    try {
      fn(event);
    } catch {
      // A listener's fault stays its own: the audit log keeps recording.
    }
  }
}

/** Which setting would let the request through, from the proxy's reason (null: nothing to set). */
export function refusalAdvice(e: Pick<AuditEvent, "host" | "port" | "reason">): string | null {
  const reason = e.reason ?? "";
  const internal = /(\S+): internal address/.exec(reason);
  if (internal) {
    const addr = internal[1];
    return `the operator's WHARF_EGRESS_ALLOW_INTERNAL (for example ${addr}${addr.includes(":") ? "/128" : "/32"}), e.g. for a registry mirror`;
  }
  if (/^not in allow_list/.test(reason))
    return `"${e.port === 80 || e.port === 443 ? e.host : `${e.host}:${e.port}`}" in the deployment's proxy_config.access_control.allow_list`;
  if (/^denied by deny_list/.test(reason))
    return "removing that entry from the deployment's proxy_config.access_control.deny_list";
  if (/^raw TCP is blocked/.test(reason))
    return `"${e.host}:${e.port}" in the deployment's proxy_config.access_control.allow_list`;
  if (/^upstream certificate rejected/.test(reason))
    return "the upstream's CA in the host's CA store (WHARF_EGRESS_SYSTEM_CA_FILE) or in WHARF_EGRESS_UPSTREAM_CA_FILE";
  if (/^cannot resolve/.test(reason))
    return `the operator's WHARF_EGRESS_HOSTS (${e.host}=<address>) or a resolvable name`;
  return null;
}

/**
 * One line for a process's log: what was refused, why, and what would allow it (`advice` when the
 * caller knows better than the proxy's reason, e.g. a build's own setting). Never a value.
 */
export function describeRefusal(
  e: Pick<AuditEvent, "host" | "port" | "method" | "path" | "reason" | "decision">,
  advice: string | null = refusalAdvice(e),
): string {
  const what = [e.method, `${e.host}:${e.port}${e.path ?? ""}`].filter(Boolean).join(" ");
  return `egress ${e.decision === "failed" ? "failed" : "refused"} ${what}: ${e.reason ?? "refused"}${advice ? `; allowed by ${advice}` : ""}`;
}
