import fs from "node:fs";
import { z } from "zod";
import { parseAuthority, type CanonicalHost } from "./policy/canonical-host.ts";
import { CidrSet } from "./policy/address-class.ts";
import { chooseSystemBundle, readSystemRoots, SystemRootsError } from "./system-roots.ts";
import { hostVariable, type Settings } from "../config/index.ts";

/**
 * Operator settings of the egress proxy (environment variables, read when the platform starts).
 * None of these can be set through `proxy_config`: reaching internal addresses is the operator's
 * decision only.
 */
export interface EgressSettings {
  /** Static name resolution: `name` or `name:port` → address (and port). Like /etc/hosts for the proxy. */
  hosts: Map<string, { address: string; port: number | null }>;
  /** Internal ranges the proxy may dial anyway (for example a company network). */
  allowInternal: CidrSet;
  /**
   * PEM roots trusted for upstream TLS on top of Node's bundled (Mozilla) list: the host's CA store
   * (`systemCaFile`), then `WHARF_EGRESS_UPSTREAM_CA_FILE`.
   */
  upstreamCaPem: string[];
  /** The host bundle read into `upstreamCaPem`, or null when none is trusted. */
  systemCaFile: string | null;
  /** Port of the explicit (HTTP_PROXY) listener inside each sandbox, on 127.0.0.1. */
  proxyPort: number;
  /** Resolve names not in `hosts` through the system resolver (off in tests: nothing leaves the box). */
  systemDns: boolean;
  /** Largest ClientHello / first request line read before deciding (bytes). */
  maxPeekBytes: number;
  /** A connection must finish its request head (or TLS ClientHello) within this (slowloris). */
  headerTimeoutMs: number;
  /** A connection with nothing in flight is closed after this long idle. */
  idleTimeoutMs: number;
  /** Concurrent client connections per sandbox; more are refused. */
  maxConnections: number;
  /** Operator-only fault injection: a request carrying `x-wharf-egress-fault: crash` crashes the data plane. */
  faultHook: boolean;
}

export const egressVariables: ReadonlyArray<[name: string, meaning: string]> = [
  [
    "WHARF_EGRESS_HOSTS",
    "static resolution for the egress proxy: comma-separated name=address or name:port=address:port",
  ],
  ["WHARF_EGRESS_ALLOW_INTERNAL", "comma-separated CIDRs of internal addresses sandboxes may reach (default none)"],
  [
    "WHARF_EGRESS_UPSTREAM_CA_FILE",
    "PEM file of extra roots trusted for upstream TLS (on top of Node's roots and the host's CA store)",
  ],
  [
    "WHARF_EGRESS_SYSTEM_CA_FILE",
    "the host's CA bundle trusted for upstream TLS: auto (default: SSL_CERT_FILE, else /etc/ssl/certs/ca-certificates.crt or the distribution's bundle), a path, or none",
  ],
  [
    "WHARF_EGRESS_SYSTEM_DNS",
    "1 (default) resolves other names with the system resolver; 0 resolves only WHARF_EGRESS_HOSTS",
  ],
  ["WHARF_EGRESS_PROXY_PORT", "port of the in-sandbox explicit proxy on 127.0.0.1 (default 3128)"],
  [
    "WHARF_EGRESS_HEADER_TIMEOUT_MS",
    "time a sandbox connection has to send its request head or TLS ClientHello (default 10000)",
  ],
  ["WHARF_EGRESS_IDLE_TIMEOUT_MS", "idle sandbox connections are closed after this (default 120000)"],
  ["WHARF_EGRESS_MAX_CONNECTIONS", "concurrent client connections per sandbox (default 512)"],
  [
    "WHARF_EGRESS_ISOLATE",
    "1 (default) runs the egress data plane in its own supervised process; 0 in the platform process",
  ],
  [
    "WHARF_EGRESS_FAULT_HOOK",
    "1 lets a request with x-wharf-egress-fault: crash crash the data plane (fault tests only; default 0)",
  ],
];

const cidr = z.string().refine((v) => {
  try {
    new CidrSet([v]);
    return true;
  } catch {
    return false;
  }
}, "not an IP address or CIDR");

export class EgressSettingsError extends Error {}

function parseHosts(text: string): EgressSettings["hosts"] {
  const out: EgressSettings["hosts"] = new Map();
  for (const entry of text
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean)) {
    const eq = entry.indexOf("=");
    if (eq < 0) throw new EgressSettingsError(`WHARF_EGRESS_HOSTS: ${entry} is not name=address`);
    const left = parseAuthority(entry.slice(0, eq), 0);
    const right = parseAuthority(entry.slice(eq + 1), 0);
    if (!left || left.host.kind !== "name")
      throw new EgressSettingsError(`WHARF_EGRESS_HOSTS: ${entry.slice(0, eq)} is not a host name`);
    if (!right || right.host.kind === "name")
      throw new EgressSettingsError(`WHARF_EGRESS_HOSTS: ${entry.slice(eq + 1)} is not an IP address`);
    const key = left.port ? `${left.host.host}:${left.port}` : left.host.host;
    out.set(key, { address: right.host.host, port: right.port || null });
  }
  return out;
}

/** The raw WHARF_EGRESS_* values (and SSL_CERT_FILE) egress settings are made from: what the data-plane child gets over IPC. */
export type EgressSource = Record<string, string | undefined>;

/**
 * The egress source from the platform's declared settings (`ctx.config.settings`, parsed once at
 * start): every spelling the start-up check accepts means the same here (`WHARF_EGRESS_SYSTEM_DNS=false`
 * is off, as `0` is).
 */
export function egressSourceFrom(
  s: Pick<
    Settings,
    | "WHARF_EGRESS_HOSTS"
    | "WHARF_EGRESS_ALLOW_INTERNAL"
    | "WHARF_EGRESS_UPSTREAM_CA_FILE"
    | "WHARF_EGRESS_SYSTEM_CA_FILE"
    | "WHARF_EGRESS_SYSTEM_DNS"
    | "WHARF_EGRESS_HEADER_TIMEOUT_MS"
    | "WHARF_EGRESS_IDLE_TIMEOUT_MS"
    | "WHARF_EGRESS_MAX_CONNECTIONS"
    | "WHARF_EGRESS_FAULT_HOOK"
    | "WHARF_EGRESS_PROXY_PORT"
  >,
): EgressSource {
  const flag = (v: boolean) => (v ? "1" : "0");
  return {
    WHARF_EGRESS_HOSTS: s.WHARF_EGRESS_HOSTS,
    WHARF_EGRESS_ALLOW_INTERNAL: s.WHARF_EGRESS_ALLOW_INTERNAL.join(","),
    WHARF_EGRESS_UPSTREAM_CA_FILE: s.WHARF_EGRESS_UPSTREAM_CA_FILE,
    WHARF_EGRESS_SYSTEM_CA_FILE: s.WHARF_EGRESS_SYSTEM_CA_FILE,
    WHARF_EGRESS_SYSTEM_DNS: flag(s.WHARF_EGRESS_SYSTEM_DNS),
    WHARF_EGRESS_HEADER_TIMEOUT_MS: String(s.WHARF_EGRESS_HEADER_TIMEOUT_MS),
    WHARF_EGRESS_IDLE_TIMEOUT_MS: String(s.WHARF_EGRESS_IDLE_TIMEOUT_MS),
    WHARF_EGRESS_MAX_CONNECTIONS: String(s.WHARF_EGRESS_MAX_CONNECTIONS),
    WHARF_EGRESS_FAULT_HOOK: flag(s.WHARF_EGRESS_FAULT_HOOK),
    WHARF_EGRESS_PROXY_PORT: String(s.WHARF_EGRESS_PROXY_PORT),
    SSL_CERT_FILE: hostVariable("SSL_CERT_FILE"),
  };
}

export function loadEgressSettings(env: EgressSource): EgressSettings {
  const allow = (env.WHARF_EGRESS_ALLOW_INTERNAL ?? "")
    .split(",")
    .map((s) => s.trim())
    .filter(Boolean);
  for (const c of allow)
    if (!cidr.safeParse(c).success)
      throw new EgressSettingsError(`WHARF_EGRESS_ALLOW_INTERNAL: ${c} is not an IP address or CIDR`);
  const port = Number(env.WHARF_EGRESS_PROXY_PORT || 3128);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new EgressSettingsError("WHARF_EGRESS_PROXY_PORT must be a port number");
  const caFile = env.WHARF_EGRESS_UPSTREAM_CA_FILE;
  let system: ReturnType<typeof readSystemRoots>;
  try {
    system = readSystemRoots(chooseSystemBundle(env.WHARF_EGRESS_SYSTEM_CA_FILE, env.SSL_CERT_FILE, fs.existsSync));
  } catch (err) {
    if (err instanceof SystemRootsError) throw new EgressSettingsError(err.message, { cause: err });
    throw err;
  }
  const upstreamCaPem = [...system.pems];
  if (caFile) {
    try {
      upstreamCaPem.push(fs.readFileSync(caFile, "utf8"));
    } catch (err) {
      throw new EgressSettingsError(`WHARF_EGRESS_UPSTREAM_CA_FILE: cannot read ${caFile}: ${(err as Error).message}`, {
        cause: err,
      });
    }
  }
  const ms = (name: string, fallback: number, min: number) => {
    const v = Number(env[name] || fallback);
    if (!Number.isInteger(v) || v < min) throw new EgressSettingsError(`${name} must be an integer ≥ ${min}`);
    return v;
  };
  return {
    hosts: parseHosts(env.WHARF_EGRESS_HOSTS ?? ""),
    allowInternal: new CidrSet(allow),
    upstreamCaPem,
    systemCaFile: system.path,
    proxyPort: port,
    systemDns: env.WHARF_EGRESS_SYSTEM_DNS !== "0",
    maxPeekBytes: 64 * 1024,
    headerTimeoutMs: ms("WHARF_EGRESS_HEADER_TIMEOUT_MS", 10_000, 100),
    idleTimeoutMs: ms("WHARF_EGRESS_IDLE_TIMEOUT_MS", 120_000, 100),
    maxConnections: ms("WHARF_EGRESS_MAX_CONNECTIONS", 512, 1),
    faultHook: env.WHARF_EGRESS_FAULT_HOOK === "1",
  };
}

export function settingsFor(partial: Partial<EgressSettings> = {}): EgressSettings {
  return {
    hosts: new Map(),
    allowInternal: new CidrSet([]),
    upstreamCaPem: [],
    systemCaFile: null,
    proxyPort: 3128,
    systemDns: false,
    maxPeekBytes: 64 * 1024,
    headerTimeoutMs: 10_000,
    idleTimeoutMs: 120_000,
    maxConnections: 512,
    faultHook: false,
    ...partial,
  };
}

export type { CanonicalHost };
