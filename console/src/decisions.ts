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
export function issuesUnder(
  items: ValidationItem[],
  prefix: Array<string | number>,
): Array<{ path: string; msg: string }> {
  return items
    .filter((i) => prefix.every((p, k) => i.loc[k] === p))
    .map((i) => ({ path: i.loc.slice(prefix.length).join("."), msg: i.msg }));
}

/** Messages for one input: its own, and those of paths below it (prefixed with the rest of the path). */
export function messagesAt(issues: Array<{ path: string; msg: string }>, path: string): string | null {
  return (
    issues
      .filter((i) => i.path === path || i.path.startsWith(path + "."))
      .map((i) =>
        i.path === path
          ? humanMessage(i.msg)
          : `${capitalise(humanPath(i.path.slice(path.length + 1)))}: ${humanMessage(i.msg)}`,
      )
      .join("; ") || null
  );
}

const capitalise = (s: string) => s.charAt(0).toUpperCase() + s.slice(1);

/** Paths the proxy_config form has an input for; anything else is listed below the form. */
export const FORM_PATHS =
  /^(rules\.\d+\.(name|enabled|match_hosts|match_paths|headers\.\d+\.(name|type|value))|access_control(\.(allow_list|deny_list))?|no_proxy)(\.|$)/;

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
  else
    out.rules = out.rules.map((r) => (r.headers ? { ...r, headers: r.headers.map(({ is_set: _s, ...h }) => h) } : r));
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
export function filterAudit(
  entries: AuditEntry[],
  f: { host: string; rule: string; minutes: number },
  now = Date.now(),
): AuditEntry[] {
  const host = f.host.trim().toLowerCase();
  const rule = f.rule.trim().toLowerCase();
  return entries.filter(
    (e) =>
      (!host || e.host.includes(host)) &&
      (!rule || (e.rule ?? "").toLowerCase().includes(rule)) &&
      (!f.minutes || Date.parse(e.last_at) >= now - f.minutes * 60_000),
  );
}

const contentText = (c: unknown): string =>
  typeof c === "string"
    ? c
    : Array.isArray(c)
      ? c.map((p) => (typeof p === "string" ? p : ((p as { text?: string })?.text ?? ""))).join("")
      : "";

/**
 * A thread's title: its first human message (or first message, or a `topic`/`input`-like string
 * value), cut to 40 characters; a thread with none yet is "New thread".
 */
export function threadTitle(values: unknown, _createdAt?: string): string {
  const v = (values && typeof values === "object" && !Array.isArray(values) ? values : {}) as Record<string, unknown>;
  const msgs = Array.isArray(v.messages)
    ? (v.messages as Array<{ type?: string; role?: string; content?: unknown }>)
    : [];
  const first = msgs.find((m) => m.type === "human" || m.role === "user" || m.role === "human") ?? msgs[0];
  let s = first ? contentText(first.content).trim() : "";
  if (!s) s = (Object.values(v).find((x) => typeof x === "string" && x.trim()) as string | undefined)?.trim() ?? "";
  s = s.replace(/\s+/g, " ");
  if (!s) return "New thread";
  return s.length > 40 ? s.slice(0, 39) + "…" : s;
}

const UNITS: Array<[Intl.RelativeTimeFormatUnit, number]> = [
  ["year", 365 * 86400],
  ["month", 30 * 86400],
  ["week", 7 * 86400],
  ["day", 86400],
  ["hour", 3600],
  ["minute", 60],
  ["second", 1],
];

/** "just now", "5 minutes ago", "in 2 days", in the browser's language. */
export function relativeTime(iso: string, now = Date.now(), locale?: string): string {
  const seconds = Math.round((Date.parse(iso) - now) / 1000);
  if (Math.abs(seconds) < 10) return new Intl.RelativeTimeFormat(locale, { numeric: "auto" }).format(0, "second");
  const [unit, size] = UNITS.find(([, s]) => Math.abs(seconds) >= s) ?? ["second", 1];
  return new Intl.RelativeTimeFormat(locale, { numeric: "auto" }).format(Math.round(seconds / size), unit);
}

/** Status pills read the same everywhere: `DEPLOY_FAILED` and `deploy_failed` → "Deploy failed". */
export function statusLabel(raw: string): string {
  const s = raw.replace(/_/g, " ").toLowerCase();
  return s.charAt(0).toUpperCase() + s.slice(1);
}

const REVISION_DONE = new Set(["DEPLOYED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED"]);

/**
 * What a deployment's status pill says, from its revisions: the API's `READY` means the deployment
 * exists, not that anything serves, so while its only revision builds it is that revision's status,
 * and a deployment still serving an older revision while a new one builds says "updating".
 */
export function deploymentState(
  status: string,
  latest: { status: string } | null,
  hasActive: boolean,
): { status: string; note: string | null } {
  if (!latest) return { status, note: null };
  const done = REVISION_DONE.has(latest.status);
  if (!hasActive)
    return latest.status === "DEPLOYED"
      ? { status, note: null }
      : { status: latest.status, note: done ? "nothing is serving" : null };
  if (!done) return { status, note: `updating: new revision ${statusLabel(latest.status).toLowerCase()}` };
  if (latest.status !== "DEPLOYED" && latest.status !== "SKIPPED")
    return { status, note: `latest revision: ${statusLabel(latest.status).toLowerCase()}` };
  return { status, note: null };
}

/** The deployments API's `source` enum in words. */
export function sourceLabel(source: string, repoUrl?: string | null): string {
  if (repoUrl) return repoUrl;
  return source === "internal_source"
    ? "Uploaded project"
    : source === "github"
      ? "GitHub"
      : source === "external_docker"
        ? "Docker image"
        : statusLabel(source);
}

/** An API message in plain words: pydantic/zod prefixes off, first letter up. */
export function humanMessage(msg: string): string {
  const s = msg.replace(/^(Value error|Assertion failed|Invalid input),\s*/i, "").trim();
  return s.charAt(0).toUpperCase() + s.slice(1);
}

/** A 422 path under a form field in words: `allow_list.0` → "line 1", `headers.1.name` → "header 2, name". */
export function humanPath(path: string): string {
  const parts = path.split(".").filter(Boolean);
  if (parts.length === 2 && /^\d+$/.test(parts[1]) && /_list$|^no_proxy$/.test(parts[0]))
    return `line ${Number(parts[1]) + 1}`;
  const out: string[] = [];
  for (let i = 0; i < parts.length; i++) {
    const next = parts[i + 1];
    if (next !== undefined && /^\d+$/.test(next)) {
      out.push(`${parts[i].replace(/s$/, "").replace(/_/g, " ")} ${Number(next) + 1}`);
      i++;
    } else out.push(/^\d+$/.test(parts[i]) ? `item ${Number(parts[i]) + 1}` : parts[i].replace(/_/g, " "));
  }
  return out.join(", ");
}

/** Advice for an access-list line the proxy will refuse because it is a URL rather than a pattern. */
export function listItemAdvice(item: string): string | null {
  const m = /^[a-z][a-z0-9+.-]*:\/\/([^/:?#]+)/i.exec(item.trim());
  return m
    ? `"${item.trim()}" is a URL: write the host alone, like ${m[1]} or *.${m[1].split(".").slice(-2).join(".")}`
    : null;
}
