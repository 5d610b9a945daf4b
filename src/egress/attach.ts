import type { Kysely } from "kysely";
import type { Database } from "../store/schema.ts";
import type { StoredProxyConfig } from "./config/proxy-config.ts";
import { currentEgressRuntime, egressRuntime } from "./egress-runtime.ts";
import { SandboxEgress } from "./capture/sandbox-egress.ts";
import { closeNamespaceListeners, type NamespaceListeners } from "./capture/netns-capture.ts";
import { deleteValues } from "./credentials/sealed-values.ts";
import { asStoredConfig, sealedRefs } from "./config/stored-config.ts";
import type { AuditRow } from "./audit/audit-log.ts";
import { describeRefusal, watchDistinctRefusals } from "./audit/refusals.ts";

/**
 * CONTRACT between the sandbox driver and the egress proxy. The sandbox driver
 * calls `attachEgress` once the sandbox's network namespace exists (before the first command runs)
 * and `detach` when the sandbox stops.
 */
export interface EgressTarget {
  sandboxId: string;
  workspaceId: string;
  /** A process whose `/proc/<pid>/ns/net` is the sandbox's network namespace (loopback only). */
  netnsPid: number;
  proxyConfig: StoredProxyConfig | null;
  /**
   * Listeners the sandbox driver already opened in the namespace, with the routes set
   * (`egressCaptureSpec`); without them, attach sets both up through an in-namespace helper.
   */
  captured?: NamespaceListeners | null;
}

export interface EgressAttachment {
  /** Environment for every command in the sandbox (HTTP(S)_PROXY, CA bundle variables, placeholders). */
  env: Record<string, string>;
  /** Files to place in the sandbox (absolute path inside the sandbox → content), e.g. the CA cert. */
  files: Record<string, string>;
  /** Replaces the live rules (PATCH of proxy_config) without restarting anything. */
  update(proxyConfig: StoredProxyConfig | null): Promise<void>;
  detach(): Promise<void>;
}

/**
 * Makes the egress proxy the sandbox's only way out: every TCP connect in its namespace lands on a
 * listener this process owns (ports 80/443 intercepted, the explicit proxy on 127.0.0.1, raw ports
 * its allow_list opens), names resolve through a stub to addresses that map back to names, and
 * nothing else leaves (the namespace has no route out). `env` and `files` make clients use and
 * trust the proxy. Throws if capture cannot be set up: a sandbox must not run without it.
 */
export async function attachEgress(target: EgressTarget): Promise<EgressAttachment> {
  const rt = await egressRuntime();
  const egress = new SandboxEgress(rt, target);
  try {
    await egress.attach(target.captured ?? null);
  } catch (err) {
    // attach closes what it adopted; this covers a failure before it did.
    if (target.captured) closeNamespaceListeners(target.captured);
    throw err;
  }
  // The sandbox's refusals in the platform's log, tagged with it: once per (host, port, reason),
  // with the setting that would allow each (its egress-log API has every one, folded).
  const unwatch = watchDistinctRefusals(target.sandboxId, (e) =>
    rt.deps.log?.warn(
      { sandbox: target.sandboxId, workspace: target.workspaceId, host: e.host, port: e.port, reason: e.reason },
      describeRefusal(e),
    ),
  );
  return {
    env: egress.env,
    files: egress.files,
    update: (proxyConfig) => egress.update(proxyConfig),
    detach: () => {
      unwatch();
      return egress.detach();
    },
  };
}

/**
 * An attachment whose environment and files are known before the namespace exists: a confined
 * service (a deployment's agent server or build step) fixes its environment and mounts when it is
 * spawned, and its namespace appears only then. `attach` completes it exactly as `attachEgress`
 * would (a PATCH that arrived in between is applied once attached); `cancel` when the namespace
 * never came.
 */
export interface PreparedEgress {
  env: Record<string, string>;
  files: Record<string, string>;
  attach(netnsPid: number, captured: NamespaceListeners | null): Promise<EgressAttachment>;
  update(proxyConfig: StoredProxyConfig | null): Promise<void>;
  cancel(): Promise<void>;
}

export async function prepareEgress(target: Omit<EgressTarget, "netnsPid" | "captured">): Promise<PreparedEgress> {
  const rt = await egressRuntime();
  const egress = new SandboxEgress(rt, { ...target, netnsPid: 0 });
  await egress.prepare();
  const attachment: EgressAttachment = {
    env: egress.env,
    files: egress.files,
    update: (proxyConfig) => egress.update(proxyConfig),
    detach: () => egress.detach(),
  };
  return {
    env: egress.env,
    files: egress.files,
    async attach(netnsPid, captured) {
      try {
        await egress.attach(captured, netnsPid);
      } catch (err) {
        if (captured) closeNamespaceListeners(captured);
        throw err;
      }
      return attachment;
    },
    update: (proxyConfig) => egress.update(proxyConfig),
    cancel: () => egress.detach(),
  };
}

/** Whether this platform runs the egress proxy (the feature is mounted): without it, namespaces have no way out. */
export function egressAvailable(): boolean {
  return currentEgressRuntime() !== null;
}

/**
 * A deleted sandbox's sealed credential values (its `opaque` headers and cloud keys) are removed
 * with it: its proxy_config held the only reference, and ciphertext nobody can use is still a
 * liability.
 */
export async function releaseEgressValues(
  db: Kysely<Database>,
  workspaceId: string,
  proxyConfig: unknown,
): Promise<void> {
  await deleteValues(db, workspaceId, sealedRefs(asStoredConfig(proxyConfig)));
}

/**
 * The egress audit log of several attachments together (a deployment's processes: `dep-<revision>`,
 * `dep-build-<revision>`), newest first, after writing what is still buffered. Never a value.
 */
export async function egressLog(
  db: Kysely<Database>,
  workspaceId: string,
  targetIds: string[],
  opts: { limit: number; before?: string; kind?: string },
): Promise<Array<AuditRow & { target: string }>> {
  await currentEgressRuntime()?.audit.flush();
  if (targetIds.length === 0) return [];
  let q = db
    .selectFrom("egress_audit_log")
    .select([
      "id",
      "sandbox_id",
      "at",
      "last_at",
      "count",
      "kind",
      "decision",
      "rule",
      "host",
      "port",
      "method",
      "path",
      "status",
      "reason",
    ])
    .where("workspace_id", "=", workspaceId)
    .where("sandbox_id", "in", targetIds);
  if (opts.before) q = q.where("id", "<", opts.before);
  if (opts.kind) q = q.where("kind", "=", opts.kind);
  const rows = await q.orderBy("id", "desc").limit(opts.limit).execute();
  return rows.map(({ sandbox_id, ...r }) => ({
    ...r,
    target: sandbox_id,
    count: Number(r.count),
    port: Number(r.port),
    status: r.status === null ? null : Number(r.status),
  }));
}

/** What a sandbox driver should capture while it creates a namespace: the ports every sandbox has, and DNS. */
export async function egressCaptureSpec(): Promise<{ tcpPorts: number[]; dns: boolean }> {
  const rt = await egressRuntime();
  return { tcpPorts: [80, 443, rt.settings.proxyPort], dns: true };
}
