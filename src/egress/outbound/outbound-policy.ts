import { classifyAddress, type CidrSet } from "../policy/address-class.ts";
import { canonicalHost, hostForUrl, type CanonicalHost } from "../policy/canonical-host.ts";
import { loadEgressSettings } from "../egress-settings.ts";
import { createResolver, type Resolve } from "../proxy/resolver.ts";

/**
 * The address policy for the platform's own outbound fetches on a tenant's behalf (image pulls,
 * source clones): the egress proxy's rule that internal addresses (loopback, private, link-local,
 * metadata, ...) are never dialled unless the operator listed their range in
 * `WHARF_EGRESS_ALLOW_INTERNAL`. Names resolve once and the checked address is the one dialled,
 * so a name cannot rebind between check and connect.
 */
export interface OutboundPolicy {
  resolve: Resolve;
  allowInternal: CidrSet;
}

/** The operator's egress settings, as the platform loaded them. */
export interface OutboundSettings {
  WHARF_EGRESS_HOSTS: string;
  WHARF_EGRESS_ALLOW_INTERNAL: string[];
  WHARF_EGRESS_SYSTEM_DNS: boolean;
}

export function outboundPolicy(s: OutboundSettings): OutboundPolicy {
  const settings = loadEgressSettings({
    WHARF_EGRESS_HOSTS: s.WHARF_EGRESS_HOSTS,
    WHARF_EGRESS_ALLOW_INTERNAL: s.WHARF_EGRESS_ALLOW_INTERNAL.join(","),
    WHARF_EGRESS_SYSTEM_DNS: s.WHARF_EGRESS_SYSTEM_DNS ? "1" : "0",
  });
  return { resolve: createResolver(settings), allowInternal: settings.allowInternal };
}

/** Why an address may not be dialled, or null (pure). */
export function outboundAddressProblem(address: string, allowInternal: CidrSet): string | null {
  const cls = classifyAddress(address);
  return cls === "public" || allowInternal.has(address) ? null : `an internal address (${cls})`;
}

export const REFUSAL_HINT = "the operator can allow internal ranges with WHARF_EGRESS_ALLOW_INTERNAL";

/** The address to dial for `host`, or the refusal (never dials). */
export async function checkOutbound(
  policy: OutboundPolicy,
  host: CanonicalHost,
  port: number,
): Promise<{ address: string } | { refused: string }> {
  let targets;
  try {
    targets = await policy.resolve(host, port);
  } catch {
    return { refused: `${hostForUrl(host)} cannot be resolved` };
  }
  let first: string | null = null;
  for (const t of targets) {
    const problem = outboundAddressProblem(t.address, policy.allowInternal);
    if (!problem) return { address: t.address };
    first ??= host.kind === "name" ? `${host.host} resolves to ${problem}` : `${host.host} is ${problem}`;
  }
  return { refused: first ?? `${hostForUrl(host)} has no address` };
}

/**
 * The address to dial for an http(s) URL the platform fetches on a tenant's behalf (a run's
 * webhook), or the refusal: its host canonicalised as the proxy does (`127.1`, `0x7f.1`,
 * `[::ffff:7f00:1]` are loopback), then `checkOutbound`.
 */
export async function checkOutboundUrl(
  policy: OutboundPolicy,
  url: URL,
): Promise<{ address: string } | { refused: string }> {
  const host = canonicalHost(url.hostname);
  if (!host) return { refused: `${url.hostname} is not a valid host` };
  const port = url.port ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
  return checkOutbound(policy, host, port);
}
