import ipaddr from "ipaddr.js";

/**
 * Classifies an address the proxy is about to dial. Everything that is not plain global unicast
 * is internal: loopback, unspecified (0/8, ::), private (RFC 1918), link-local (incl. the
 * 169.254.169.254 metadata service and fe80::/10), CGNAT 100.64/10, unique-local fc00::/7 (incl.
 * AWS's fd00:ec2::254), multicast, broadcast, reserved/benchmarking/documentation ranges (incl. the
 * DNS stub's fake addresses 198.18/15), and IPv6 forms that embed an IPv4 address (IPv4-mapped,
 * IPv4-compatible, NAT64 64:ff9b::/96, 6to4 2002::/16, Teredo 2001::/32) — those would let an IPv4
 * check be bypassed by spelling the address as IPv6.
 */
export type AddressClass = "public" | string;

const GLOBAL_V6 = ipaddr.parseCIDR("2000::/3");
const NAT64_LOCAL = ipaddr.parseCIDR("64:ff9b:1::/48");
const ZERO_NET = ipaddr.parseCIDR("0.0.0.0/8");

export function parseAddress(address: string): ipaddr.IPv4 | ipaddr.IPv6 | null {
  try {
    return ipaddr.parse(address);
  } catch {
    return null;
  }
}

export function classifyAddress(address: string): AddressClass {
  const a = parseAddress(address);
  if (!a) return "invalid";
  if (a.kind() === "ipv4") {
    const v4 = a as ipaddr.IPv4;
    if (v4.match(ZERO_NET)) return "unspecified";
    const r = v4.range();
    return r === "unicast" ? "public" : r;
  }
  const v6 = a as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return "ipv4Mapped";
  const r = v6.range();
  if (r !== "unicast") return r;
  if (v6.match(NAT64_LOCAL)) return "rfc6052";
  if (!v6.match(GLOBAL_V6)) return "reserved"; // includes IPv4-compatible ::a.b.c.d
  return "public";
}

/** A set of CIDR ranges (operator settings). */
export class CidrSet {
  private readonly ranges: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]>;
  constructor(cidrs: string[]) {
    this.ranges = cidrs.map((c) =>
      c.includes("/")
        ? ipaddr.parseCIDR(c)
        : ([ipaddr.parse(c), ipaddr.parse(c).kind() === "ipv4" ? 32 : 128] as [ipaddr.IPv4 | ipaddr.IPv6, number]),
    );
  }
  get empty(): boolean {
    return this.ranges.length === 0;
  }
  has(address: string): boolean {
    const a = parseAddress(address);
    if (!a) return false;
    return this.ranges.some((r) => r[0].kind() === a.kind() && a.match(r));
  }
}
