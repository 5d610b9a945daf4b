import type { Kysely } from "kysely";
import type { SecretBox } from "../crypto/secret-box.ts";
import type { Logger } from "../log/logger.ts";
import { readSecretValues } from "../secrets/secret-store.ts";
import type { Database } from "../store/schema.ts";
import { DbAuditLog, type AuditEvent } from "./audit/audit-log.ts";
import { workspaceCa } from "./proxy/ca-store.ts";
import { LeafMinter } from "./proxy/certificates.ts";
import { EgressProxy, type RequestAuthorizer } from "./proxy/egress-proxy.ts";
import { loadEgressSettings, type EgressSettings } from "./egress-settings.ts";
import { secretRefs } from "./credentials/header-values.ts";
import { SandboxPolicy } from "./policy/policy.ts";
import { openValues } from "./credentials/sealed-values.ts";
import { asStoredConfig, sealedRefs, type StoredConfigV1 } from "./config/stored-config.ts";

/**
 * Builds a sandbox's credential engines (cloud signing, tokens, callbacks) from its live
 * policy; called on attach and on every PATCH. `env` and `files` join what the sandbox gets
 * (compatibility placeholders), never a real credential.
 */
export type AuthorizerFactory = (sandbox: { id: string; workspaceId: string }, policy: SandboxPolicy, audit: (e: Omit<AuditEvent, "sandboxId" | "workspaceId">) => void) => {
  authorizers: RequestAuthorizer[];
  env: Record<string, string>;
  files: Record<string, string>;
};

export interface EgressRuntimeDeps {
  db: Kysely<Database>;
  box: SecretBox;
  log: Logger | null;
  settings?: EgressSettings;
  /** Endpoints of this process the proxy must never dial (the control plane). */
  selfEndpoints?: Array<{ address: string; port: number }>;
}

/**
 * The egress proxy of this platform process: one `EgressProxy` serving every attached sandbox,
 * the audit log writer, and the workspaces' CAs. Created by the egress feature; `attachEgress`
 * uses it.
 */
export class EgressRuntime {
  readonly proxy: EgressProxy;
  readonly audit: DbAuditLog;
  readonly settings: EgressSettings;
  private readonly minters = new Map<string, Promise<LeafMinter>>();
  /** Set by the cloud engines; without it, cloud rules and callbacks are stored but inert. */
  authorizerFactory: AuthorizerFactory | null = null;

  /** The sandbox's engines for a policy, with audit events attributed to it. */
  enginesFor(sandbox: { id: string; workspaceId: string }, policy: SandboxPolicy): ReturnType<AuthorizerFactory> {
    if (!this.authorizerFactory) return { authorizers: [], env: {}, files: {} };
    return this.authorizerFactory(sandbox, policy, (e) => this.audit.record({ ...e, sandboxId: sandbox.id, workspaceId: sandbox.workspaceId } as AuditEvent));
  }

  constructor(readonly deps: EgressRuntimeDeps) {
    this.settings = deps.settings ?? loadEgressSettings();
    this.audit = new DbAuditLog(deps.db, deps.log);
    this.proxy = new EgressProxy({ settings: this.settings, audit: this.audit, log: deps.log });
    for (const e of deps.selfEndpoints ?? []) this.proxy.addSelfEndpoint(e.address, e.port);
  }

  /** One leaf minter (and cache) per workspace CA, shared by the workspace's sandboxes. */
  minterFor(workspaceId: string): Promise<LeafMinter> {
    let m = this.minters.get(workspaceId);
    if (!m) {
      m = workspaceCa(this.deps.db, this.deps.box, workspaceId).then((ca) => new LeafMinter(ca));
      m.catch(() => this.minters.delete(workspaceId));
      this.minters.set(workspaceId, m);
    }
    return m;
  }

  /**
   * Compiles a stored config into live rules: workspace secrets are read now ("resolved when the
   * configuration is applied"), sealed values opened. A value that cannot be resolved makes its
   * rule fail closed, never the whole sandbox.
   */
  async compile(workspaceId: string, stored: unknown): Promise<SandboxPolicy> {
    const cfg = asStoredConfig(stored);
    if (!cfg) return SandboxPolicy.empty();
    const keys = new Set<string>();
    for (const r of cfg.rules) {
      if (r.type === "header") for (const h of r.headers) if (h.type === "workspace_secret") secretRefs(h.value).forEach((k) => keys.add(k));
      const creds = r.type === "cloud_a" ? [r.cloud_a.access_key_id, r.cloud_a.secret_access_key] : r.type === "cloud_b" ? [r.cloud_b.service_account_json] : [];
      for (const c of creds) if (c.type === "workspace_secret") secretRefs(c.value).forEach((k) => keys.add(k));
    }
    const [secrets, sealed] = await Promise.all([readSecretValues(this.deps.db, this.deps.box, workspaceId, [...keys]), openValues(this.deps, workspaceId, sealedRefs(cfg))]);
    return new SandboxPolicy(cfg, { secrets, sealed });
  }

  storedRefs(stored: unknown): string[] {
    return sealedRefs(asStoredConfig(stored) as StoredConfigV1 | null);
  }

  async close(): Promise<void> {
    await this.proxy.close();
    await this.audit.flush();
  }
}

let current: EgressRuntime | null = null;
let waiters: Array<(rt: EgressRuntime) => void> = [];

export function setEgressRuntime(rt: EgressRuntime | null): void {
  current = rt;
  if (rt) {
    for (const w of waiters) w(rt);
    waiters = [];
  }
}

export function currentEgressRuntime(): EgressRuntime | null {
  return current;
}

/** The runtime, waiting briefly for the egress feature to create it. */
export function egressRuntime(timeoutMs = 30_000): Promise<EgressRuntime> {
  if (current) return Promise.resolve(current);
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error("the egress feature is not running (add it to the platform's features)")), timeoutMs);
    t.unref();
    waiters.push((rt) => {
      clearTimeout(t);
      resolve(rt);
    });
  });
}
