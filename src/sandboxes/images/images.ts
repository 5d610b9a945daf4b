import path from "node:path";
import { z } from "zod";
import { outboundPolicy } from "../../egress/index.ts";
import { conflict, invalidAt } from "../../http/errors.ts";
import type { Router } from "../../http/route.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import { imageHost, isLoopbackHost, pullImage } from "../driver/oci-image.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import { BuildQueue } from "./build-queue.ts";
import { presentSnapshot } from "../api/present.ts";
import { findRegistry, registryHost, registryPassword, type RegistryRow } from "./registries.ts";
import type { SnapshotRow } from "../store/sandbox-store.ts";

/**
 * `POST /v2/sandboxes/snapshots {name, docker_image, fs_capacity_bytes, registry_id?}`: a snapshot
 * made from an OCI image. The row is `building` while skopeo pulls and umoci unpacks (in the
 * background; the client polls), then `ready` with `image_digest`, or `failed` with the reason in
 * `status_message`. Sandboxes started from it sit on the image's filesystem instead of the base.
 */
const GiB = 1024 ** 3;
const body = z.object({
  name: z
    .string()
    .regex(
      /^[a-z0-9]([a-z0-9._-]{0,98}[a-z0-9])?$/,
      "Snapshot names are 1-100 characters: lowercase letters, digits, '.', '_' and '-'",
    ),
  docker_image: z
    .string()
    .min(1)
    .max(500)
    .regex(
      /^[A-Za-z0-9][A-Za-z0-9._:/@-]*$/,
      "An image reference such as python:3.12-slim or registry.example.com/team/app:tag",
    ),
  fs_capacity_bytes: z
    .number()
    .int()
    .min(64 * 1024 ** 2)
    .max(1024 * GiB),
  registry_id: z.string().min(1).max(200).nullable().optional(),
  tag: z
    .string()
    .regex(/^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/)
    .default("latest"),
  labels: z.record(z.string().min(1).max(63), z.string().max(255)).optional(),
  run_config: z.unknown().optional(),
});

function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e.code === "23505" || /UNIQUE constraint failed/i.test(e.message ?? "");
}

/** Where an image snapshot's filesystem lives. */
export function imageDir(manager: SandboxManager, snapshotId: string): string {
  return path.join(manager.settings.stateDir, "oci-images", snapshotId);
}

export function imageRootfs(manager: SandboxManager, snapshotId: string): string {
  return path.join(imageDir(manager, snapshotId), "bundle", "rootfs");
}

/** Snapshot builds of one platform, a couple at a time (each pulls, decompresses and unpacks). */
const BUILD_CONCURRENCY = 2;
const queues = new WeakMap<SandboxManager, BuildQueue>();

async function build(
  ctx: PlatformContext,
  manager: SandboxManager,
  snap: SnapshotRow,
  registry: RegistryRow | undefined,
): Promise<void> {
  let queue = queues.get(manager);
  if (!queue) queues.set(manager, (queue = new BuildQueue(BUILD_CONCURRENCY)));
  if (queue.ahead > 0) ctx.log.info({ snapshotId: snap.id, ahead: queue.ahead }, "snapshot build queued");
  await queue.run(() => buildNow(ctx, manager, snap, registry));
}

async function buildNow(
  ctx: PlatformContext,
  manager: SandboxManager,
  snap: SnapshotRow,
  registry: RegistryRow | undefined,
): Promise<void> {
  const image = snap.docker_image!;
  try {
    const host = imageHost(image);
    const credentials = registry
      ? { username: registry.username, password: registryPassword(ctx.box, registry), host: registryHost(registry.url) }
      : null;
    const insecure = isLoopbackHost(host) || Boolean(registry?.url.startsWith("http://"));
    const started = Date.now();
    const policy = outboundPolicy(ctx.config.settings);
    const { digest } = await pullImage({
      image,
      dest: imageDir(manager, snap.id),
      credentials,
      insecure,
      policy,
      capacityBytes: Number(snap.fs_capacity_bytes),
    });
    await ctx.db
      .updateTable("sandbox_snapshots")
      .set({ status: "ready", image_digest: digest, updated_at: nowIso() })
      .where("id", "=", snap.id)
      .where("status", "=", "building")
      .execute();
    ctx.log.info({ snapshotId: snap.id, image, digest, ms: Date.now() - started }, "snapshot built from image");
  } catch (err) {
    const message = (err as Error).message;
    ctx.log.warn({ snapshotId: snap.id, image, err }, "snapshot from image failed");
    await ctx.db
      .updateTable("sandbox_snapshots")
      .set({ status: "failed", status_message: message, updated_at: nowIso() })
      .where("id", "=", snap.id)
      .execute();
  }
}

export function registerImageSnapshotRoute(router: Router, ctx: PlatformContext, manager: SandboxManager): void {
  router.add({
    method: "post",
    path: "/sandboxes/snapshots",
    summary: "Create a snapshot from an OCI image (status building, then ready or failed)",
    tags: ["sandboxes"],
    body,
    responses: {
      201: { description: "The snapshot (building)", schema: z.record(z.string(), z.unknown()) },
      409: { description: "Name and tag in use" },
    },
    handler: async ({ c, principal, body: b }) => {
      await manager.ensureAvailable();
      let registry: RegistryRow | undefined;
      if (b.registry_id) {
        registry = await findRegistry(ctx, principal.workspaceId, b.registry_id);
        if (!registry) throw invalidAt(["body", "registry_id"], `Registry ${b.registry_id} not found`);
      }
      const now = nowIso();
      const snap: SnapshotRow = {
        id: newId(),
        workspace_id: principal.workspaceId,
        name: b.name,
        tag: b.tag,
        status: "building",
        status_message: null,
        source_sandbox_id: null,
        fs_capacity_bytes: b.fs_capacity_bytes,
        fs_used_bytes: null,
        size_bytes: null,
        labels: JSON.stringify(b.labels ?? {}),
        created_by: principal.userId,
        created_at: now,
        updated_at: now,
        docker_image: b.docker_image,
        image_digest: null,
        registry_id: registry?.id ?? null,
        base_snapshot_id: null,
      };
      try {
        await ctx.db.insertInto("sandbox_snapshots").values(snap).execute();
      } catch (err) {
        if (isUniqueViolation(err)) throw conflict(`A snapshot named ${b.name}:${b.tag} already exists`);
        throw err;
      }
      manager.track(build(ctx, manager, snap, registry));
      return c.json(presentSnapshot(snap), 201);
    },
  });
}
