import dns from "node:dns";
import type { CanonicalHost } from "../policy/canonical-host.ts";
import type { EgressSettings } from "../egress-settings.ts";

export interface Target {
  address: string;
  port: number;
}

/** Resolves a destination to the addresses to dial; a name may map to several. */
export type Resolve = (host: CanonicalHost, port: number) => Promise<Target[]>;

const CACHE_MS = 30_000;
const CACHE_MAX = 10_000;

/**
 * The proxy resolves names itself (the sandbox's own DNS answers are fake addresses) and caches
 * answers briefly: a cached answer is also a pin, so a name cannot rebind between the check and
 * the dial of one request. Operator `WHARF_EGRESS_HOSTS` entries win over DNS.
 */
export function createResolver(
  settings: EgressSettings,
  lookup: typeof dns.promises.lookup = dns.promises.lookup,
): Resolve {
  const cache = new Map<string, { at: number; addresses: string[] }>();
  return async (host, port) => {
    if (host.kind !== "name") return [{ address: host.host, port }];
    const exact = settings.hosts.get(`${host.host}:${port}`) ?? settings.hosts.get(host.host);
    if (exact) return [{ address: exact.address, port: exact.port ?? port }];
    if (!settings.systemDns)
      throw Object.assign(new Error(`${host.host} is not in WHARF_EGRESS_HOSTS and system DNS is off`), {
        code: "ENOTFOUND",
      });
    const hit = cache.get(host.host);
    let addresses: string[];
    if (hit && Date.now() - hit.at < CACHE_MS) addresses = hit.addresses;
    else {
      const answers = await lookup(host.host, { all: true, verbatim: true });
      addresses = answers.map((a) => a.address);
      cache.set(host.host, { at: Date.now(), addresses });
      if (cache.size > CACHE_MAX) cache.delete(cache.keys().next().value!);
    }
    return addresses.map((address) => ({ address, port }));
  };
}
