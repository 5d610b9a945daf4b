import type { AuditEvent } from "../audit/audit-log.ts";
import type { CanonicalHost } from "../policy/canonical-host.ts";
import type { InjectedHeader, SandboxPolicy } from "../policy/policy.ts";
import type { EgressProxy } from "./egress-proxy.ts";
import type { Target } from "./resolver.ts";
import type { ClientReply, ClientRequest, ConnContext, SandboxHandle } from "./types.ts";

/** Where a request stands: an audited decision, or answered by an engine without going upstream. */
export type RequestDecision = "pending" | "answered" | AuditEvent["decision"];

/**
 * One intercepted request from its arrival to its end, made once when it arrives: the sandbox and
 * its rules (read once, at the start), the verified destination, the decision with its rule and
 * reason, the checked upstream address, timings. Every step (destination check, decision,
 * dispatch, audit, the upstream failure path) takes it whole. It is also the context the upstream
 * answer hands back on failure: one object per request, no closure.
 */
export class RequestContext {
  readonly sandbox: SandboxHandle;
  readonly policy: SandboxPolicy;
  /** TLS towards the sandbox, hence towards the upstream. */
  readonly secure: boolean;
  /** Came over HTTP/2 (an HTTP/2-first upstream when secure). */
  readonly h2: boolean;
  /** `performance.now()` when the request arrived, and when its access was decided (0 until then). */
  readonly arrivedAt = performance.now();
  decidedAt = 0;
  /** The verified destination and normalised path, once read from the request (`destinationOf`). */
  host!: CanonicalHost;
  port = 0;
  path = "";
  query = "";
  decision: RequestDecision = "pending";
  /** The rule (header rule or engine) behind the decision, and why, when there is one. */
  rule: string | null = null;
  reason: string | null = null;
  /** The checked upstream address, once allowed. */
  target: Target | null = null;
  /** The static header rule's values to inject, once decided. */
  injected: InjectedHeader[] | null = null;

  constructor(
    readonly proxy: EgressProxy,
    readonly req: ClientRequest,
    readonly res: ClientReply,
    readonly conn: ConnContext,
  ) {
    this.sandbox = conn.sandbox;
    this.policy = conn.sandbox.policy;
    this.secure = conn.tls;
    this.h2 = req.h2;
  }

  /** Records the decision and audits it with the request's destination, method and path. */
  decide(kind: AuditEvent["kind"], decision: AuditEvent["decision"], rule?: string, reason?: string): void {
    this.decision = decision;
    this.decidedAt = performance.now();
    this.rule = rule ?? null;
    this.reason = reason ?? null;
    this.proxy.audit(this.sandbox, {
      kind,
      decision,
      rule,
      host: this.host.host,
      port: this.port,
      method: this.req.method,
      path: this.path || undefined,
      reason,
    });
  }
}
