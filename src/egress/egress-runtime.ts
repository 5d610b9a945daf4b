import type { Kysely } from "kysely";
import type { SecretBox } from "../crypto/secret-box.ts";
import type { Logger } from "../log/logger.ts";
import { onSecretsChanged, readSecretValues } from "../secrets/secret-store.ts";
import type { Database } from "../store/schema.ts";
import { DbAuditLog, type AuditEvent } from "./audit/audit-log.ts";
import { workspaceCa } from "./proxy/ca-store.ts";
import type { CaMaterial } from "./proxy/certificates.ts";
import type { RequestAuthorizer } from "./proxy/egress-proxy.ts";
import { createResolver } from "./proxy/resolver.ts";
import { TargetChecker } from "./proxy/target-checker.ts";
import { LocalDataPlane, policyOf, type CompiledConfig, type DataPlane } from "./supervisor/data-plane.ts";
import { SupervisedDataPlane } from "./supervisor/supervised-data-plane.ts";
import { loadEgressSettings, type EgressSettings, type EgressSource } from "./egress-settings.ts";
import { secretRefs } from "./credentials/header-values.ts";
import { SandboxPolicy } from "./policy/policy.ts";
import { openValues } from "./credentials/sealed-values.ts";
import { asStoredConfig, sealedRefs, type StoredConfigV1 } from "./config/stored-config.ts";

/**
 * Builds a sandbox's credential engines (cloud signing, tokens, callbacks) from its live
 * policy; called on attach and on every PATCH. `env` and `files` join what the sandbox gets
 * (compatibility placeholders), never a real credential.
 */
export type AuthorizerFactory = (
  sandbox: { id: string; workspaceId: string },
  policy: SandboxPolicy,
  audit: (e: Omit<AuditEvent, "sandboxId" | "workspaceId">) => void,
) => {
  authorizers: RequestAuthorizer[];
  env: Record<string, string>;
  files: Record<string, string>;
};

export interface EgressRuntimeDeps {
  db: Kysely<Database>;
  box: SecretBox;
  log: Logger | null;
  /** The settings' source (`egressSourceFrom(ctx.config.settings)`): the data-plane child gets it over IPC. */
  source: EgressSource;
  /** Settings of a test's own (else made from `source`). */
  settings?: EgressSettings;
  /** Endpoints of this process the proxy must never dial (the control plane). */
  selfEndpoints?: Array<{ address: string; port: number }>;
  /**
   * Runs the data plane in its own supervised process (the platform does); otherwise in this one
   * (library use, tests with custom settings). The child gets its settings (`source`) over IPC.
   */
  isolate?: boolean;
}

/**
 * The egress proxy of this platform process: one `EgressProxy` serving every attached sandbox,
 * the audit log writer, and the workspaces' CAs. Created by the egress feature; `attachEgress`
 * uses it.
 */
export class EgressRuntime {
  /** Where connections are served: a supervised child process, or this process. */
  readonly plane: DataPlane;
  /** Resolution and address checks for the engines built here (their env and files). */
  readonly targets: TargetChecker;
  readonly audit: DbAuditLog;
  readonly settings: EgressSettings;
  private readonly cas = new Map<string, Promise<CaMaterial>>();
  /** Running attachments, told when a workspace secret their rules name changes. */
  private readonly attached = new Set<SecretDependent>();
  private readonly unsubscribe: () => void;
  /** Set by the cloud engines; without it, cloud rules and callbacks are stored but inert. */
  authorizerFactory: AuthorizerFactory | null = null;

  /** The sandbox's engines for a policy, with audit events attributed to it. */
  enginesFor(sandbox: { id: string; workspaceId: string }, policy: SandboxPolicy): ReturnType<AuthorizerFactory> {
    if (!this.authorizerFactory) return { authorizers: [], env: {}, files: {} };
    return this.authorizerFactory(sandbox, policy, (e) =>
      this.audit.record({ ...e, sandboxId: sandbox.id, workspaceId: sandbox.workspaceId } as AuditEvent),
    );
  }

  constructor(readonly deps: EgressRuntimeDeps) {
    this.settings = deps.settings ?? loadEgressSettings(deps.source);
    this.audit = new DbAuditLog(deps.db, deps.log);
    if (deps.isolate) {
      this.plane = new SupervisedDataPlane(this.audit, deps.log, deps.source);
      this.targets = new TargetChecker(createResolver(this.settings), this.settings.allowInternal);
    } else {
      const local = new LocalDataPlane(this.settings, this.audit, () => this.authorizerFactory, deps.log);
      this.plane = local;
      this.targets = local.proxy.targets;
    }
    for (const e of deps.selfEndpoints ?? []) this.addSelfEndpoint(e.address, e.port);
    this.unsubscribe = onSecretsChanged((workspaceId, keys) => this.secretsChanged(workspaceId, keys));
  }

  /** Registers a running attachment for secret changes; returns the unregister. */
  track(a: SecretDependent): () => void {
    this.attached.add(a);
    return () => this.attached.delete(a);
  }

  /**
   * A workspace secret was written or deleted: every running attachment whose rules name it
   * re-resolves them at once (a deleted one makes its rules answer 502, fail closed).
   */
  private secretsChanged(workspaceId: string, keys: string[]): void {
    for (const a of this.attached) {
      if (a.workspaceId !== workspaceId || !keys.some((k) => a.secretKeys().has(k))) continue;
      a.refresh().catch((err) =>
        this.deps.log?.error({ err, workspaceId }, "egress: re-resolving rules after a secret change failed"),
      );
    }
  }

  addSelfEndpoint(address: string, port: number): void {
    this.plane.addSelfEndpoint(address, port);
    this.targets.addSelfEndpoint(address, port);
  }

  /** The workspace's interception CA (created on first use), cached per workspace. */
  caFor(workspaceId: string): Promise<CaMaterial> {
    let m = this.cas.get(workspaceId);
    if (!m) {
      m = workspaceCa(this.deps.db, this.deps.box, workspaceId);
      m.catch(() => this.cas.delete(workspaceId));
      this.cas.set(workspaceId, m);
    }
    return m;
  }

  /**
   * Compiles a stored config into live rules: workspace secrets are read now ("resolved when the
   * configuration is applied"), sealed values opened. A value that cannot be resolved makes its
   * rule fail closed, never the whole sandbox.
   */
  async compile(workspaceId: string, stored: unknown): Promise<SandboxPolicy> {
    return policyOf(await this.resolveConfig(workspaceId, stored));
  }

  /** The stored config with every workspace secret and sealed value it names, resolved now. */
  async resolveConfig(workspaceId: string, stored: unknown): Promise<CompiledConfig> {
    const cfg = asStoredConfig(stored);
    if (!cfg) return { cfg: null, secrets: [], sealed: [] };
    const keys = secretKeysOf(cfg);
    const [secrets, sealed] = await Promise.all([
      readSecretValues(this.deps.db, this.deps.box, workspaceId, [...keys]),
      openValues(this.deps, workspaceId, sealedRefs(cfg)),
    ]);
    return { cfg, secrets: [...secrets], sealed: [...sealed] };
  }

  storedRefs(stored: unknown): string[] {
    return sealedRefs(asStoredConfig(stored) as StoredConfigV1 | null);
  }

  async close(): Promise<void> {
    this.unsubscribe();
    await this.plane.close();
    await this.audit.flush();
  }
}

/** What the runtime needs of a running attachment to apply secret changes to it. */
export interface SecretDependent {
  workspaceId: string;
  secretKeys(): Set<string>;
  refresh(): Promise<void>;
}

/** The workspace secrets a stored config names (`{KEY}` references in header values and cloud credentials). */
export function secretKeysOf(stored: unknown): Set<string> {
  const keys = new Set<string>();
  const cfg = asStoredConfig(stored);
  if (!cfg) return keys;
  for (const r of cfg.rules) {
    if (r.type === "header")
      for (const h of r.headers) if (h.type === "workspace_secret") secretRefs(h.value).forEach((k) => keys.add(k));
    const creds =
      r.type === "cloud_a"
        ? [r.cloud_a.access_key_id, r.cloud_a.secret_access_key]
        : r.type === "cloud_b"
          ? [r.cloud_b.service_account_json]
          : [];
    for (const c of creds) if (c.type === "workspace_secret") secretRefs(c.value).forEach((k) => keys.add(k));
  }
  return keys;
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
    const t = setTimeout(
      () => reject(new Error("the egress feature is not running (add it to the platform's features)")),
      timeoutMs,
    );
    t.unref();
    waiters.push((rt) => {
      clearTimeout(t);
      resolve(rt);
    });
  });
}
