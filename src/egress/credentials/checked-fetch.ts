import tls from "node:tls";
import type { Agent, fetch as undiciFetch } from "undici";
import { canonicalHost } from "../policy/canonical-host.ts";
import { SandboxPolicy } from "../policy/policy.ts";
import type { Target } from "../proxy/resolver.ts";
import type { EgressSettings } from "../egress-settings.ts";
import type { TargetChecker } from "../proxy/target-checker.ts";

/**
 * The engines' outbound fetch (callback URLs, the Google token endpoint): reached from the proxy
 * process, never through a sandbox, resolved by the proxy's own resolver (operator
 * `WHARF_EGRESS_HOSTS`, pinned answers) and checked by the proxy's own address classification
 * (internal ranges only through `WHARF_EGRESS_ALLOW_INTERNAL`, never the proxy's or the control
 * plane's endpoints). The address checked is the address dialled: the connector is handed it.
 */
export class DestinationBlocked extends Error {
  constructor(
    readonly host: string,
    readonly port: number,
    readonly reason: string,
  ) {
    super(`egress blocked: ${reason}`);
    this.name = "DestinationBlocked";
  }
}

export function createCheckedFetch(rt: { targets: TargetChecker; settings: EgressSettings }): typeof fetch {
  const checker = rt.targets;
  const resolve = checker.resolve;
  const addressOpts = () => checker.addressOpts();
  const anywhere = SandboxPolicy.empty();
  const pins = new Map<string, Target>();
  const ca = [...tls.rootCertificates, ...rt.settings.upstreamCaPem];
  // undici (about a hundred modules) is loaded at the first fetch: most proxies never make one.
  let client: Promise<PinnedClient> | null = null;
  return (async (input: string | URL | Request, init?: RequestInit) => {
    const url = new URL(typeof input === "string" || input instanceof URL ? input.toString() : input.url);
    if (url.protocol !== "http:" && url.protocol !== "https:")
      throw new Error(`egress: ${url.protocol} is not fetched`);
    const host = canonicalHost(url.hostname.replace(/^\[|\]$/g, ""));
    if (!host) throw new Error(`egress: ${url.hostname} is not a valid host`);
    const port = Number(url.port || (url.protocol === "https:" ? 443 : 80));
    const targets = await resolve(host, port);
    const opts = addressOpts();
    let checked: Target | null = null;
    let why = "no address";
    for (const t of targets) {
      const p = anywhere.addressVerdict({ kind: "allow", raw: false, byAddress: false }, t.address, t.port, opts);
      if (!p) {
        checked = t;
        break;
      }
      why = `${host.host} resolves to ${t.address}: ${p}`;
    }
    if (!checked) throw new DestinationBlocked(host.host, port, why);
    if (pins.size > 1024) pins.clear();
    pins.set(pinKey(url.protocol, url.hostname, url.port), checked);
    const { agent, fetch: undiciFetch } = await (client ??= pinnedClient(pins, ca));
    return undiciFetch(input as never, { ...(init as object), dispatcher: agent } as never) as unknown as Response;
  }) as typeof fetch;
}

interface PinnedClient {
  agent: Agent;
  fetch: typeof undiciFetch;
}

/** An undici agent that dials the address checked for a destination (`pins`), never one it resolves itself. */
async function pinnedClient(pins: Map<string, Target>, ca: string[]): Promise<PinnedClient> {
  const { Agent, buildConnector, fetch } = await import("undici");
  const connector = buildConnector({ ca, timeout: 10_000 });
  const agent = new Agent({
    keepAliveTimeout: 4_000,
    connect: (opts, cb) => {
      const pin = pins.get(pinKey(opts.protocol, opts.hostname, opts.port));
      if (!pin) return cb(new Error("egress: destination was not checked"), null);
      const name = canonicalHost(opts.hostname.replace(/^\[|\]$/g, ""));
      connector(
        {
          ...opts,
          hostname: pin.address,
          host: pin.address,
          port: String(pin.port),
          servername: name?.kind === "name" ? name.host : undefined,
        },
        cb,
      );
    },
  });
  return { agent, fetch };
}

function pinKey(protocol: string, hostname: string, port: string): string {
  const p = protocol.replace(/:?$/, ":");
  return `${p}//${hostname.replace(/^\[|\]$/g, "").toLowerCase()}:${Number(port || (p === "https:" ? 443 : 80))}`;
}
