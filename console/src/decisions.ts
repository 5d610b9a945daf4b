/**
 * The console's decisions, free of React and the DOM so that they are tested table by table
 * (`test/console/decisions.test.ts`).
 */

export interface ValidationItem {
  loc: Array<string | number>;
  msg: string;
  type: string;
}

/** 422 items whose `loc` starts with `prefix`, with the rest of the path joined by dots. */
export function issuesUnder(items: ValidationItem[], prefix: Array<string | number>): Array<{ path: string; msg: string }> {
  return items.filter((i) => prefix.every((p, k) => i.loc[k] === p)).map((i) => ({ path: i.loc.slice(prefix.length).join("."), msg: i.msg }));
}

/** Messages for one input: its own, and those of paths below it (prefixed with the rest of the path). */
export function messagesAt(issues: Array<{ path: string; msg: string }>, path: string): string | null {
  return issues.filter((i) => i.path === path || i.path.startsWith(path + ".")).map((i) => (i.path === path ? i.msg : `${i.path.slice(path.length + 1)}: ${i.msg}`)).join("; ") || null;
}

/** Paths the proxy_config form has an input for; anything else is listed below the form. */
export const FORM_PATHS = /^(rules\.\d+\.(name|enabled|match_hosts|match_paths|headers\.\d+\.(name|type|value))|access_control(\.(allow_list|deny_list))?|no_proxy)(\.|$)/;

export interface HeaderValue {
  name: string;
  type: "plaintext" | "opaque" | "workspace_secret";
  value?: string;
  is_set?: boolean;
}
export interface Rule {
  name?: string;
  type?: string;
  enabled?: boolean;
  match_hosts?: string[];
  match_paths?: string[];
  headers?: HeaderValue[];
  [k: string]: unknown;
}
export interface ProxyConfig {
  rules?: Rule[];
  callbacks?: unknown[];
  access_control?: { allow_list?: string[]; deny_list?: string[] } | null;
  no_proxy?: string[];
  [k: string]: unknown;
}

/**
 * What the editor sends: empty parts dropped (an untouched editor sends no proxy_config at all),
 * and `is_set` markers of write-only values removed (such a value must be typed again).
 */
export function cleanProxyConfig(pc: ProxyConfig): ProxyConfig | null {
  const out: ProxyConfig = { ...pc };
  if (!out.rules?.length) delete out.rules;
  else out.rules = out.rules.map((r) => (r.headers ? { ...r, headers: r.headers.map(({ is_set: _s, ...h }) => h) } : r));
  if (!out.callbacks?.length) delete out.callbacks;
  if (!out.no_proxy?.length) delete out.no_proxy;
  const ac = out.access_control;
  if (!ac || (!ac.allow_list && !ac.deny_list)) delete out.access_control;
  return Object.keys(out).length ? out : null;
}

/** `NAME=value` lines → the deployments API's secrets; a bare `NAME` keeps its value on PATCH. */
export function parseSecrets(text: string): Array<{ name: string; value: string | null }> {
  return text
    .split("\n")
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const eq = l.indexOf("=");
      return eq < 0 ? { name: l, value: null } : { name: l.slice(0, eq).trim(), value: l.slice(eq + 1) };
    });
}

export interface Entry {
  kind: string;
  size: number;
  mtime: number;
  name: string;
}

/** `find -printf '%y\t%s\t%T@\t%P\n'` lines → entries, folders first, then by name. */
export function parseListing(stdout: string): Entry[] {
  return stdout
    .split("\n")
    .filter(Boolean)
    .map((line) => {
      const [kind, size, mtime, ...name] = line.split("\t");
      return { kind, size: Number(size), mtime: Number(mtime), name: name.join("\t") };
    })
    .sort((a, b) => ((a.kind === "d") === (b.kind === "d") ? a.name.localeCompare(b.name) : a.kind === "d" ? -1 : 1));
}

export interface AuditEntry {
  id: string;
  at: string;
  last_at: string;
  count: number;
  kind: string;
  decision: string;
  rule: string | null;
  host: string;
  port: number;
  method: string | null;
  path: string | null;
  status: number | null;
  reason?: string | null;
}

/** The egress log's client-side filters: host and rule substrings, and a time window in minutes. */
export function filterAudit(entries: AuditEntry[], f: { host: string; rule: string; minutes: number }, now = Date.now()): AuditEntry[] {
  const host = f.host.trim().toLowerCase();
  const rule = f.rule.trim().toLowerCase();
  return entries.filter(
    (e) => (!host || e.host.includes(host)) && (!rule || (e.rule ?? "").toLowerCase().includes(rule)) && (!f.minutes || Date.parse(e.last_at) >= now - f.minutes * 60_000),
  );
}
