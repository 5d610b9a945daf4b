import ipaddr from "ipaddr.js";
import { RE2JS } from "re2js";
import { canonicalHost, parsePort, type CanonicalHost } from "./canonical-host.ts";
import { compileHostGlob, PatternError, type HostGlob } from "./host-glob.ts";

/**
 * The six pattern forms of `access_control` lists:
 *   host             ports 80 and 443 only
 *   host:PORT        exactly that port (not additive with 80/443)
 *   *.domain[:PORT]  strict subdomains (the apex is not included)
 *   ~regex           whole-host match, linear time (RE2), ports 80/443; no port suffix parsing
 *   IPv4 / CIDR      no port: HTTP(S) only in allow mode, every port in deny mode
 *   [IPv6]:PORT      IPv6 literals are bracketed when they carry a port (bare IPv6 / CIDR = no port)
 */
export type Ports = "web" | number;

export type AccessPattern =
  | { kind: "host"; source: string; glob: HostGlob; ports: Ports }
  | { kind: "regex"; source: string; regex: RE2JS; ports: "web" }
  | { kind: "cidr"; source: string; range: [ipaddr.IPv4 | ipaddr.IPv6, number] }
  | { kind: "ip-port"; source: string; host: CanonicalHost; port: number };

export const MAX_REGEX_LENGTH = 256;
const MAX_HOST_LENGTH = 253;

export const isWebPort = (port: number) => port === 80 || port === 443;

function parseCidr(text: string): [ipaddr.IPv4 | ipaddr.IPv6, number] | null {
  try {
    if (text.includes("/")) {
      const [addr, bits] = text.split("/");
      if (!/^\d{1,3}$/.test(bits)) return null;
      const parsed = ipaddr.parse(addr.startsWith("[") && addr.endsWith("]") ? addr.slice(1, -1) : addr);
      const n = Number(bits);
      if (n > (parsed.kind() === "ipv4" ? 32 : 128)) return null;
      if (parsed.kind() === "ipv4" && !/^\d+\.\d+\.\d+\.\d+$/.test(addr)) return null;
      return [parsed, n];
    }
    if (/^\d+\.\d+\.\d+\.\d+$/.test(text) && ipaddr.IPv4.isValidFourPartDecimal(text))
      return [ipaddr.IPv4.parse(text), 32];
    const bare = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
    if (bare.includes(":") && ipaddr.IPv6.isValid(bare)) {
      const v6 = ipaddr.IPv6.parse(bare);
      return v6.isIPv4MappedAddress() ? [v6.toIPv4Address(), 32] : [v6, 128];
    }
  } catch {
    return null;
  }
  return null;
}

/** Parses one access-control entry; throws PatternError with a message fit for a 422. */
export function parseAccessPattern(source: string): AccessPattern {
  if (typeof source !== "string" || source.trim() === "") throw new PatternError("pattern must not be empty");
  if (source !== source.trim()) throw new PatternError("pattern must not have surrounding spaces");
  if (source.startsWith("~")) {
    const body = source.slice(1);
    if (body.length === 0) throw new PatternError("regex pattern must not be empty");
    if (body.length > MAX_REGEX_LENGTH)
      throw new PatternError(`regex pattern is longer than ${MAX_REGEX_LENGTH} characters`);
    try {
      // RE2 semantics: no backreferences or lookaround, matching time linear in the host length.
      return { kind: "regex", source, regex: RE2JS.compile(`^(?:${body})$`, RE2JS.CASE_INSENSITIVE), ports: "web" };
    } catch (err) {
      throw new PatternError(`invalid regex: ${(err as Error).message}`, { cause: err });
    }
  }
  if (source.length > 300) throw new PatternError("pattern is too long");
  // [IPv6]:PORT (a bracketed literal with no port is the bare-address form).
  if (source.startsWith("[")) {
    const m = /^\[([^\]]+)\](?::(.*))?$/.exec(source);
    if (!m) throw new PatternError(`malformed bracketed IPv6 pattern: ${JSON.stringify(source)}`);
    const host = canonicalHost(m[1]);
    if (!host || host.kind === "name") throw new PatternError(`not an IPv6 address: ${JSON.stringify(m[1])}`);
    if (m[2] === undefined) return { kind: "cidr", source, range: parseCidr(m[1])! };
    const port = parsePort(m[2]);
    if (port === null) throw new PatternError(`invalid port ${JSON.stringify(m[2])} (1-65535, no leading zeros)`);
    return { kind: "ip-port", source, host, port };
  }
  if (source.includes("/")) {
    const range = parseCidr(source);
    if (!range) throw new PatternError(`invalid CIDR (a CIDR cannot carry a port): ${JSON.stringify(source)}`);
    return { kind: "cidr", source, range };
  }
  const colons = (source.match(/:/g) ?? []).length;
  if (colons > 1) {
    const range = parseCidr(source);
    if (!range)
      throw new PatternError(`not a valid IPv6 address (write [IPv6]:PORT to give a port): ${JSON.stringify(source)}`);
    return { kind: "cidr", source, range };
  }
  let hostText = source;
  let ports: Ports = "web";
  if (colons === 1) {
    const i = source.lastIndexOf(":");
    hostText = source.slice(0, i);
    const port = parsePort(source.slice(i + 1));
    if (port === null)
      throw new PatternError(`invalid port ${JSON.stringify(source.slice(i + 1))} (1-65535, no leading zeros)`);
    ports = port;
  }
  if (/^\d+\.\d+\.\d+\.\d+$/.test(hostText)) {
    if (!ipaddr.IPv4.isValidFourPartDecimal(hostText))
      throw new PatternError(`not a valid IPv4 address: ${JSON.stringify(hostText)}`);
    if (ports === "web") return { kind: "cidr", source, range: [ipaddr.IPv4.parse(hostText), 32] };
    return { kind: "ip-port", source, host: { kind: "ipv4", host: hostText }, port: ports };
  }
  const host = hostText.includes("*") ? null : canonicalHost(hostText);
  if (host && host.kind !== "name") {
    // Other IPv4 spellings (127.1, 0x7f.0.0.1) are refused: patterns must say what they mean.
    throw new PatternError(`write IPv4 addresses in dotted decimal: ${JSON.stringify(hostText)}`);
  }
  if (hostText.includes("*") && !hostText.startsWith("*."))
    throw new PatternError(`only a leading "*." wildcard is allowed in access patterns: ${JSON.stringify(source)}`);
  if (hostText.includes("*") && hostText.slice(2).includes("*"))
    throw new PatternError(`only a leading "*." wildcard is allowed in access patterns: ${JSON.stringify(source)}`);
  return { kind: "host", source, glob: compileHostGlob(hostText), ports };
}

function portMatches(ports: Ports, port: number): boolean {
  return ports === "web" ? isWebPort(port) : ports === port;
}

/** Does a name-or-literal pattern match the destination `host:port` (names, regex, IP with port)? */
export function patternMatchesHost(p: AccessPattern, host: CanonicalHost, port: number): boolean {
  switch (p.kind) {
    case "host":
      return portMatches(p.ports, port) && p.glob.matches(host);
    case "regex":
      return isWebPort(port) && host.host.length <= MAX_HOST_LENGTH && p.regex.matches(host.host);
    case "ip-port":
      return p.port === port && p.host.kind === host.kind && p.host.host === host.host;
    case "cidr":
      return false;
  }
}

/** Does an address pattern (IP literal or CIDR) contain the address the proxy would dial? */
export function patternMatchesAddress(p: AccessPattern, address: string): boolean {
  if (p.kind === "ip-port") return false;
  if (p.kind !== "cidr") return false;
  try {
    let a = ipaddr.parse(address);
    if (a.kind() === "ipv6" && (a as ipaddr.IPv6).isIPv4MappedAddress()) a = (a as ipaddr.IPv6).toIPv4Address();
    return a.kind() === p.range[0].kind() && a.match(p.range);
  } catch {
    return false;
  }
}

/** Does an `ip-port` pattern match the dialled address and port (an IPv4/IPv6 literal with a port)? */
export function patternMatchesAddressPort(p: AccessPattern, address: string, port: number): boolean {
  if (p.kind !== "ip-port" || p.port !== port) return false;
  const h = canonicalHost(address);
  return h !== null && h.kind === p.host.kind && h.host === p.host.host;
}

export { PatternError };
