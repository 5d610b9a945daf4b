import type { CanonicalHost } from "../policy/canonical-host.ts";
import type { AddressCheckOptions, ConnectionVerdict, SandboxPolicy } from "../policy/policy.ts";
import type { Resolve, Target } from "./resolver.ts";
import type { SandboxHandle } from "./types.ts";

const TARGET_CACHE_MS = 30_000;

/**
 * Resolution and address classification for everything the proxy dials: the sandbox's requests
 * and tunnels, and the credential engines' own calls (token endpoints, callbacks).
 */
export class TargetChecker {
  /** `address|port` pairs the proxy listens on itself (never dialled: self-connection). */
  private readonly selfEndpoints = new Set<string>();

  constructor(
    readonly resolve: Resolve,
    private readonly allowInternal: AddressCheckOptions["allowInternal"],
  ) {}

  addSelfEndpoint(address: string, port: number): void {
    this.selfEndpoints.add(`${address}|${port}`);
  }

  addressOpts(): AddressCheckOptions {
    return {
      allowInternal: this.allowInternal,
      isSelf: (address: string, port: number) =>
        this.selfEndpoints.has(`${address}|${port}`) ||
        this.selfEndpoints.has(`0.0.0.0|${port}`) ||
        this.selfEndpoints.has(`::|${port}`),
    };
  }

  /** The cached answer of `check` for this policy, if still fresh (no promise on the hot path). */
  cached(
    sb: SandboxHandle,
    policy: SandboxPolicy,
    host: CanonicalHost,
    port: number,
  ): Target | { blocked: string } | null {
    const hit = sb.targets.get(`${host.kind}:${host.host}:${port}`);
    return hit && hit.policy === policy && Date.now() - hit.at < TARGET_CACHE_MS ? hit.target : null;
  }

  /**
   * Resolves the destination once, classifies every answer and returns the address to dial (the
   * one that was checked), or why none may be dialled. Cached per policy for a short while: the
   * cached answer is the pin that keeps a name from rebinding between check and dial.
   */
  async check(
    sb: SandboxHandle,
    policy: SandboxPolicy,
    host: CanonicalHost,
    port: number,
    verdict: ConnectionVerdict,
  ): Promise<Target | { blocked: string }> {
    const key = `${host.kind}:${host.host}:${port}`;
    const hit = sb.targets.get(key);
    if (hit && hit.policy === policy && Date.now() - hit.at < TARGET_CACHE_MS) return hit.target;
    let result: Target | { blocked: string };
    if (verdict.kind === "deny") result = { blocked: verdict.reason };
    else {
      let targets: Target[];
      try {
        targets = await this.resolve(host, port);
      } catch (err) {
        // Not cached: a resolution failure may be transient.
        return { blocked: `cannot resolve ${host.host} (${(err as NodeJS.ErrnoException).code ?? "error"})` };
      }
      const opts = this.addressOpts();
      let firstProblem = "no address";
      result = { blocked: firstProblem };
      for (const t of targets) {
        const problem = policy.addressVerdict(verdict, t.address, port, opts, host);
        if (!problem) {
          result = t;
          break;
        }
        if (firstProblem === "no address")
          firstProblem =
            host.kind === "name" ? `${host.host} resolves to ${t.address}: ${problem}` : `${t.address}: ${problem}`;
        result = { blocked: firstProblem };
      }
    }
    if (sb.targets.size > 4096) sb.targets.clear();
    sb.targets.set(key, { at: Date.now(), policy, target: result });
    return result;
  }
}
