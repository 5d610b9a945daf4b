import {
  isWebPort,
  parseAccessPattern,
  patternMatchesAddress,
  patternMatchesAddressPort,
  patternMatchesHost,
  type AccessPattern,
} from "./access-patterns.ts";
import { classifyAddress, type CidrSet } from "./address-class.ts";
import type { CanonicalHost } from "./canonical-host.ts";
import { SECRET_REF_SYNTAX, headerValueProblem } from "../credentials/header-values.ts";
import { anyGlobMatches, compileHostGlob, type HostGlob } from "./host-glob.ts";
import { compilePathPattern, pathMatches, type PathPattern } from "./path-patterns.ts";
import type {
  StoredCallback,
  StoredCloudARule,
  StoredCloudBRule,
  StoredConfigV1,
  StoredHeader,
  StoredSecret,
} from "../config/stored-config.ts";

/** Values a stored config refers to: workspace secrets by key, sealed values by id. */
export interface ResolvedValues {
  secrets: Map<string, string>;
  sealed: Map<string, string>;
}

export interface InjectedHeader {
  name: string;
  lower: string;
  value: string;
}

export interface HeaderRule {
  name: string;
  hosts: HostGlob[];
  paths: PathPattern[];
  /** Null when a value could not be resolved (secret deleted, bad value): matching requests fail closed. */
  headers: InjectedHeader[] | null;
  problem: string | null;
}

export interface CallbackRule {
  index: number;
  hosts: HostGlob[];
  url: string;
  ttlSeconds: number;
  requestHeaders: InjectedHeader[] | null;
}

export type ConnectionVerdict =
  | { kind: "deny"; reason: string }
  /** Allowed by name; each resolved address must still pass `addressAllowed`. */
  | { kind: "allow"; raw: boolean; byAddress: false }
  /** Only an IP/CIDR entry can allow it: decided per resolved address. */
  | { kind: "allow"; raw: boolean; byAddress: true };

export interface AddressCheckOptions {
  allowInternal: CidrSet;
  /** `ip:port` pairs and bare IPs the proxy itself listens on (self-connection). */
  isSelf(address: string, port: number): boolean;
}

function resolveHeader(h: StoredHeader, values: ResolvedValues): { value: string | null; problem: string | null } {
  if (h.type === "plaintext") return { value: h.value, problem: null };
  if (h.type === "opaque") {
    const v = values.sealed.get(h.ref);
    return v === undefined
      ? { value: null, problem: "sealed value is missing" }
      : { value: v, problem: headerValueProblem("plaintext", v) };
  }
  let missing: string | null = null;
  const v = h.value.replace(new RegExp(SECRET_REF_SYNTAX, "g"), (_m, key: string) => {
    const s = values.secrets.get(key);
    if (s === undefined) missing = key;
    return s ?? "";
  });
  if (missing) return { value: null, problem: `workspace secret ${missing} no longer exists` };
  return { value: v, problem: headerValueProblem("plaintext", v) };
}

function resolveHeaders(
  list: StoredHeader[],
  values: ResolvedValues,
): { headers: InjectedHeader[] | null; problem: string | null } {
  const out: InjectedHeader[] = [];
  for (const h of list) {
    const r = resolveHeader(h, values);
    if (r.problem || r.value === null)
      return { headers: null, problem: `header ${h.name}: ${r.problem ?? "unresolved"}` };
    out.push({ name: h.name, lower: h.name.toLowerCase(), value: r.value });
  }
  return { headers: out, problem: null };
}

const EMPTY: StoredConfigV1 = { version: 1, rules: [], callbacks: [], access_control: null, no_proxy: [] };

/**
 * The live rules of one sandbox, compiled once per apply (create, PATCH, restart) and replaced as a
 * whole, so a request sees either the old or the new rules, never a mix.
 */
export class SandboxPolicy {
  readonly mode: "default" | "allow" | "deny";
  readonly patterns: AccessPattern[];
  readonly noProxy: HostGlob[];
  readonly headerRules: HeaderRule[];
  readonly callbacks: CallbackRule[];
  readonly cloudA: StoredCloudARule | null;
  readonly cloudB: StoredCloudBRule | null;
  readonly env: Record<string, string>;
  /** Destinations the platform lets this target dial at internal addresses (`StoredConfigV1.internal_hosts`). */
  readonly internalHosts: ReadonlySet<string>;
  /** Extra upstream trust for this target (`StoredConfigV1.upstream_ca_files`). */
  readonly upstreamCaFiles: readonly string[];
  private readonly byHost = new Map<string, HeaderRule[]>();

  constructor(
    readonly stored: StoredConfigV1,
    private readonly values: ResolvedValues,
  ) {
    const ac = stored.access_control;
    this.mode = !ac ? "default" : "allow_list" in ac ? "allow" : "deny";
    this.patterns = ac ? ("allow_list" in ac ? ac.allow_list : ac.deny_list).map(parseAccessPattern) : [];
    this.noProxy = stored.no_proxy.map(compileHostGlob);
    this.headerRules = [];
    const env: Record<string, string> = {};
    let cloudA: StoredCloudARule | null = null;
    let cloudB: StoredCloudBRule | null = null;
    for (const r of stored.rules) {
      if (!r.enabled) continue;
      if (r.env_vars) Object.assign(env, r.env_vars);
      if (r.type === "cloud_a") cloudA ??= r;
      else if (r.type === "cloud_b") cloudB ??= r;
      else {
        const { headers, problem } = resolveHeaders(r.headers, values);
        this.headerRules.push({
          name: r.name,
          hosts: r.match_hosts.map(compileHostGlob),
          paths: r.match_paths.map(compilePathPattern),
          headers,
          problem,
        });
      }
    }
    this.cloudA = cloudA;
    this.cloudB = cloudB;
    this.env = env;
    this.internalHosts = new Set((stored.internal_hosts ?? []).map((h) => h.toLowerCase()));
    this.upstreamCaFiles = stored.upstream_ca_files ?? [];
    this.callbacks = stored.callbacks.map((c: StoredCallback, index) => ({
      index,
      hosts: c.match_hosts.map(compileHostGlob),
      url: c.url,
      ttlSeconds: c.ttl_seconds,
      requestHeaders: resolveHeaders(c.request_headers, values).headers,
    }));
  }

  /**
   * The enabled cloud rules with their credentials resolved (for the cloud credential engines);
   * a credential that cannot be resolved is null, and its engine must fail closed.
   */
  cloudCredentials(): {
    cloudA: { name: string; accessKeyId: string | null; secretAccessKey: string | null } | null;
    cloudB: { name: string; serviceAccountJson: string | null; scopes: string[] } | null;
  } {
    const open = (v: StoredSecret): string | null =>
      v.type === "opaque"
        ? (this.values.sealed.get(v.ref) ?? null)
        : (this.values.secrets.get(v.value.slice(1, -1)) ?? null);
    return {
      cloudA: this.cloudA
        ? {
            name: this.cloudA.name,
            accessKeyId: open(this.cloudA.cloud_a.access_key_id),
            secretAccessKey: open(this.cloudA.cloud_a.secret_access_key),
          }
        : null,
      cloudB: this.cloudB
        ? {
            name: this.cloudB.name,
            serviceAccountJson: open(this.cloudB.cloud_b.service_account_json),
            scopes: this.cloudB.cloud_b.scopes,
          }
        : null,
    };
  }

  static empty(): SandboxPolicy {
    return new SandboxPolicy(EMPTY, { secrets: new Map(), sealed: new Map() });
  }

  /** Ports other than 80/443 that an allow_list entry opens (listeners needed for raw TCP). */
  rawPorts(): number[] {
    if (this.mode !== "allow") return [];
    const ports = new Set<number>();
    for (const p of this.patterns) {
      if (p.kind === "host" && typeof p.ports === "number" && !isWebPort(p.ports)) ports.add(p.ports);
      if (p.kind === "ip-port" && !isWebPort(p.port)) ports.add(p.port);
    }
    return [...ports].sort((a, b) => a - b);
  }

  isNoProxy(host: CanonicalHost): boolean {
    return this.noProxy.length > 0 && anyGlobMatches(this.noProxy, host);
  }

  /** First phase of the access decision, on the destination as named by the client. */
  connectionVerdict(host: CanonicalHost, port: number): ConnectionVerdict {
    const web = isWebPort(port);
    const raw = !web || this.isNoProxy(host);
    if (this.mode === "default")
      return web
        ? { kind: "allow", raw, byAddress: false }
        : { kind: "deny", reason: "raw TCP is blocked (only ports 80 and 443 are open without an allow_list)" };
    if (this.mode === "deny") {
      if (!web)
        return { kind: "deny", reason: "raw TCP is blocked (a deny_list cannot open ports other than 80 and 443)" };
      const hit = this.patterns.find((p) => patternMatchesHost(p, host, port));
      return hit
        ? { kind: "deny", reason: `denied by deny_list entry ${hit.source}` }
        : { kind: "allow", raw, byAddress: false };
    }
    if (this.patterns.some((p) => patternMatchesHost(p, host, port))) return { kind: "allow", raw, byAddress: false };
    // IP and CIDR entries allow addresses, not names: a name no entry names is refused before it is
    // ever resolved (resolving every name a sandbox asks for would carry data out in DNS labels).
    if (host.kind !== "name" && this.patterns.some((p) => p.kind === "cidr" || p.kind === "ip-port"))
      return { kind: "allow", raw, byAddress: true };
    return { kind: "deny", reason: `not in allow_list (${host.host}:${port})` };
  }

  /** Whether the platform lets this named destination be dialled at an internal address. */
  internalAllowed(host: CanonicalHost | undefined, port: number): boolean {
    if (!host || host.kind !== "name" || this.internalHosts.size === 0) return false;
    return this.internalHosts.has(`${host.host}:${port}`) || (isWebPort(port) && this.internalHosts.has(host.host));
  }

  /**
   * Second phase, for each address a destination resolved to. Internal addresses are refused
   * unless the operator allowed their range (or, for a build step, the host's registry by name);
   * no proxy_config can open them.
   */
  addressVerdict(
    verdict: ConnectionVerdict,
    address: string,
    port: number,
    opts: AddressCheckOptions,
    host?: CanonicalHost,
  ): string | null {
    if (opts.isSelf(address, port)) return "the proxy's own address";
    const cls = classifyAddress(address);
    if (cls !== "public" && !opts.allowInternal.has(address) && !this.internalAllowed(host, port))
      return `internal address (${cls})`;
    if (verdict.kind !== "allow") return verdict.kind === "deny" ? verdict.reason : "denied";
    if (this.mode === "deny") {
      const hit = this.patterns.find((p) => patternMatchesAddress(p, address));
      if (hit) return `denied by deny_list entry ${hit.source}`;
    }
    if (verdict.byAddress) {
      const web = isWebPort(port);
      const ok = this.patterns.some(
        (p) => (web && patternMatchesAddress(p, address)) || patternMatchesAddressPort(p, address, port),
      );
      if (!ok) return `not in allow_list (${address}:${port})`;
    }
    return null;
  }

  /** The first enabled header rule matching host and normalised path (first match wins). */
  headerRuleFor(host: CanonicalHost, normalisedPath: string): HeaderRule | null {
    if (this.headerRules.length === 0) return null;
    const key = `${host.kind}:${host.host}`;
    let candidates = this.byHost.get(key);
    if (!candidates) {
      candidates = this.headerRules.filter((r) => anyGlobMatches(r.hosts, host));
      if (this.byHost.size > 4096) this.byHost.clear();
      this.byHost.set(key, candidates);
    }
    for (const r of candidates) if (pathMatches(r.paths, normalisedPath)) return r;
    return null;
  }

  /** The first callback whose hosts match (only consulted when no header rule matches the host). */
  callbackFor(host: CanonicalHost): CallbackRule | null {
    if (this.headerRules.some((r) => anyGlobMatches(r.hosts, host))) return null;
    return this.callbacks.find((c) => anyGlobMatches(c.hosts, host)) ?? null;
  }
}
