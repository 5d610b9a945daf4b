import net from "node:net";
import { domainToASCII } from "node:url";

/**
 * One canonical spelling of a destination host, used for every decision (access control, rule
 * matching, certificate names, the upstream authority). Different spellings of one destination
 * (`Api.Example.com.`, `127.1`, `0x7f.0.0.1`, `2130706433`, `[::ffff:127.0.0.1]`) must never be
 * treated as different hosts: a one-character change must not move a request past a rule.
 */
export type CanonicalHost =
  { kind: "name"; host: string } | { kind: "ipv4"; host: string } | { kind: "ipv6"; host: string };

const LABEL = /^(?!-)[a-z0-9_-]{1,63}(?<!-)$/;
const MAX_NAME = 253;

/** IPv4-mapped / IPv4-compatible IPv6 (`::ffff:a.b.c.d`, `::ffff:7f00:1`) → the IPv4 address. */
function embeddedIpv4(v6: string): string | null {
  const m = /^::ffff:(?:0:)?([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v6) ?? null;
  if (m) {
    const hi = parseInt(m[1], 16);
    const lo = parseInt(m[2], 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  const d = /^::ffff:(?:0:)?(\d+\.\d+\.\d+\.\d+)$/.exec(v6);
  return d && net.isIPv4(d[1]) ? d[1] : null;
}

/** Lower-case, compressed form of an IPv6 literal (through the WHATWG parser). */
function canonicalIpv6(raw: string): string | null {
  if (!net.isIPv6(raw)) return null;
  try {
    return new URL(`http://[${raw}]/`).hostname.slice(1, -1);
  } catch {
    return null;
  }
}

/**
 * Canonical form of a host as written in a CONNECT target, a `Host` header, an SNI name, a URL or
 * a rule. Returns null when the text is not a valid host. IPv6 may be bracketed or not.
 */
export function canonicalHost(input: string): CanonicalHost | null {
  if (typeof input !== "string" || input.length === 0 || input.length > 300) return null;
  let raw = input;
  if (raw.startsWith("[") && raw.endsWith("]")) raw = raw.slice(1, -1);
  if (raw.includes(":")) {
    if (raw.includes("%")) return null; // zone ids never name a remote destination
    const v6 = canonicalIpv6(raw.toLowerCase());
    if (!v6) return null;
    const v4 = embeddedIpv4(v6);
    return v4 ? { kind: "ipv4", host: v4 } : { kind: "ipv6", host: v6 };
  }
  // Control characters, spaces, slashes, '@', '%' etc. never appear in a host.
  if (!/^[\p{L}\p{N}._-]+$/u.test(raw)) return null;
  if (raw.endsWith(".")) raw = raw.slice(0, -1);
  if (raw.length === 0 || raw.endsWith(".")) return null;
  const ascii = /^[\x21-\x7e]+$/.test(raw) ? raw.toLowerCase() : domainToASCII(raw);
  if (!ascii) return null;
  // The URL parser applies inet_aton rules (`127.1`, `0x7f.1`, `2130706433`, octal parts) exactly
  // as clients and resolvers do.
  if (/^[0-9a-fx.]+$/.test(ascii) && /^[0-9]|\.[0-9]/.test(ascii)) {
    let parsed: string;
    try {
      parsed = new URL(`http://${ascii}/`).hostname;
    } catch {
      return null; // numeric-looking but not a valid address (e.g. 1.2.3.256)
    }
    if (net.isIPv4(parsed)) return { kind: "ipv4", host: parsed };
  }
  if (ascii.length > MAX_NAME) return null;
  const labels = ascii.split(".");
  if (!labels.every((l) => LABEL.test(l))) return null;
  // A last label that is all digits would be read as an IPv4 part by URL parsers; not a name.
  if (/^\d+$/.test(labels[labels.length - 1])) return null;
  return { kind: "name", host: ascii };
}

/** `host` for names and IPv4, `[v6]` for IPv6: the form used in URLs and Host headers. */
export function hostForUrl(h: CanonicalHost): string {
  return h.kind === "ipv6" ? `[${h.host}]` : h.host;
}

/** Parses a port written in decimal with no sign, no leading zeros, 1–65535. */
export function parsePort(text: string): number | null {
  if (!/^[1-9][0-9]{0,4}$/.test(text)) return null;
  const n = Number(text);
  return n <= 65535 ? n : null;
}

/**
 * Splits an authority (`host`, `host:port`, `[v6]`, `[v6]:port`) into a canonical host and port.
 * An unbracketed IPv6 literal is taken as a host without port (`2001:db8::1:443` is itself an
 * address), so a port is only read after a bracket or after a name/IPv4 host.
 */
export function parseAuthority(text: string, defaultPort: number | null): { host: CanonicalHost; port: number } | null {
  if (typeof text !== "string" || text.length === 0 || text.length > 300) return null;
  let hostPart = text;
  let port: number | null = defaultPort;
  if (text.startsWith("[")) {
    const close = text.indexOf("]");
    if (close < 0) return null;
    hostPart = text.slice(0, close + 1);
    const rest = text.slice(close + 1);
    if (rest !== "") {
      if (!rest.startsWith(":")) return null;
      port = parsePort(rest.slice(1));
      if (port === null) return null;
    }
  } else if ((text.match(/:/g) ?? []).length === 1) {
    const i = text.indexOf(":");
    hostPart = text.slice(0, i);
    port = parsePort(text.slice(i + 1));
    if (port === null) return null;
  } else if (text.includes(":")) {
    if (!net.isIPv6(text)) return null;
  }
  if (port === null) return null;
  const host = canonicalHost(hostPart);
  return host ? { host, port } : null;
}
