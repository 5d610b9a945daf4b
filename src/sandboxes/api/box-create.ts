import crypto from "node:crypto";
import { prepareProxyConfig, type StoredProxyConfig } from "../../egress/index.ts";
import { conflict, HttpError, invalidAt, notFound } from "../../http/errors.ts";
import type { Router } from "../../http/route.ts";
import type { PlatformContext } from "../../platform/context.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import { presentSandbox } from "./present.ts";
import { findSnapshot, sealEnv, type SandboxRow } from "../store/sandbox-store.ts";
import { createBody, DEFAULTS } from "./schemas.ts";
import { cpuOf, isUniqueViolation, record, TAGS } from "./route-support.ts";

/** `POST /sandboxes/boxes`: a new sandbox, from a warm one when the request fits. */
export function registerCreateRoute(router: Router, ctx: PlatformContext, manager: SandboxManager): void {
  const base = () => ctx.baseUrl();
  router.add({
    method: "post",
    path: "/sandboxes/boxes",
    summary: "Create a sandbox (waits until an exec would succeed unless wait_for_ready is false)",
    tags: TAGS,
    body: createBody,
    bodyOptional: true,
    responses: {
      201: { description: "The sandbox", schema: record },
      408: { description: "Not ready within timeout" },
      409: { description: "Name in use" },
    },
    handler: async ({ c, principal, body }) => {
      await manager.ensureAvailable();
      const { snapshotId, fromImage } = await snapshotToStartFrom(ctx, principal.workspaceId, body);
      let proxyConfig: StoredProxyConfig | null = null;
      if (body.proxy_config)
        proxyConfig = await prepareProxyConfig({ db: ctx.db, box: ctx.box }, principal.workspaceId, body.proxy_config);
      const now = nowIso();
      const cpu = cpuOf(body);
      const memBytes = body.mem_bytes ?? DEFAULTS.memBytes;
      const fsCapacityBytes = body.fs_capacity_bytes ?? DEFAULTS.fsCapacityBytes;
      const row = await manager.admissions.admitThen(
        principal.workspaceId,
        { memBytes, fsCapacityBytes, creates: true },
        async () => {
          // A warm sandbox (half-started with default resources) when the request fits one.
          const id =
            manager.claimWarm({
              cpuMillicores: cpu.cpu_millicores,
              memBytes,
              fsCapacityBytes,
              snapshot: Boolean(snapshotId),
            }) ?? newId();
          const row: SandboxRow = {
            id,
            workspace_id: principal.workspaceId,
            name: body.name ?? `sandbox-${crypto.randomBytes(4).toString("hex")}`,
            status: "provisioning",
            status_message: null,
            status_changed_at: now,
            snapshot_id: snapshotId,
            ...cpu,
            mem_bytes: memBytes,
            fs_capacity_bytes: fsCapacityBytes,
            idle_ttl_seconds: body.idle_ttl_seconds ?? DEFAULTS.idleTtlSeconds,
            delete_after_stop_seconds: body.delete_after_stop_seconds ?? DEFAULTS.deleteAfterStopSeconds,
            labels: JSON.stringify(body.labels ?? {}),
            ...sealEnv(ctx.box, principal.workspaceId, id, body.env_vars),
            proxy_config: proxyConfig ? JSON.stringify(proxyConfig) : null,
            runtime: null,
            owner_replica: ctx.cluster?.replicaId ?? null,
            stopped_at: null,
            created_at: now,
            created_by: principal.userId,
            updated_at: now,
            updated_by: principal.userId,
          };
          await insertSandbox(ctx, manager, row);
          return row;
        },
      );
      const id = row.id;
      // A captured snapshot is a layer to unpack; an image snapshot is the filesystem underneath.
      manager.launch(row, snapshotId && !fromImage ? manager.snapshotPath(snapshotId) : null);
      if (!body.wait_for_ready) return c.json(presentSandbox(row, base()), 201);
      const settled = await manager.waitSettled(id, body.timeout * 1000);
      if (!settled) throw notFound("Sandbox");
      if (settled.status === "provisioning")
        throw new HttpError(408, `Timeout waiting for sandbox to be ready (last status: ${settled.status})`);
      return c.json(presentSandbox(settled, base()), 201);
    },
  });
}

/** The snapshot a create names (by id, name or either), which must be ready; none when it names none. */
async function snapshotToStartFrom(
  ctx: PlatformContext,
  workspaceId: string,
  body: { snapshot_id?: string; snapshot_name?: string; snapshot?: string },
): Promise<{ snapshotId: string | null; fromImage: boolean }> {
  const snapshotRef = body.snapshot_id ?? body.snapshot_name ?? body.snapshot;
  if (!snapshotRef) return { snapshotId: null, fromImage: false };
  const snap = await findSnapshot(ctx.db, workspaceId, snapshotRef);
  const loc = body.snapshot_id ? "snapshot_id" : body.snapshot_name ? "snapshot_name" : "snapshot";
  if (!snap) throw invalidAt(["body", loc], `Snapshot ${snapshotRef} not found`);
  if (snap.status !== "ready") throw invalidAt(["body", loc], `Snapshot ${snapshotRef} is ${snap.status}, not ready`);
  return { snapshotId: snap.id, fromImage: Boolean(snap.docker_image) };
}

/** Inserts a new sandbox's row; a claimed warm sandbox goes back to the pool when that fails. */
async function insertSandbox(ctx: PlatformContext, manager: SandboxManager, row: SandboxRow): Promise<void> {
  try {
    await ctx.db.insertInto("sandboxes").values(row).execute();
  } catch (err) {
    // Not awaited: the warm sandbox may still be starting, and other admissions wait for this one.
    manager
      .releaseWarm(row.id)
      .catch((e) => ctx.log.warn({ id: row.id, err: e }, "claimed warm sandbox not given back"));
    if (isUniqueViolation(err)) throw conflict(`A sandbox named ${row.name} already exists`);
    throw err;
  }
}
