import type { z } from "zod";
import type { PlatformContext } from "../../platform/context.ts";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import type { SandboxRow, SnapshotRow } from "../store/sandbox-store.ts";
import type { snapshotBody } from "../api/schemas.ts";

/**
 * A snapshot is the sandbox's writable layer as a zstd tarball (whiteouts and opaque-directory
 * marks kept), applied over the same read-only base when a new sandbox starts from it. The row is
 * `building` while the archive is written, then `ready` or `failed` with the reason.
 */
export async function takeSnapshot(
  ctx: PlatformContext,
  manager: SandboxManager,
  box: SandboxRow,
  userId: string,
  body: z.infer<typeof snapshotBody>,
): Promise<SnapshotRow> {
  const id = newId();
  const now = nowIso();
  const row: SnapshotRow = {
    id,
    workspace_id: box.workspace_id,
    name: body.name,
    tag: body.tag,
    status: "building",
    status_message: null,
    source_sandbox_id: box.id,
    fs_capacity_bytes: body.fs_capacity_bytes ?? Number(box.fs_capacity_bytes),
    fs_used_bytes: null,
    size_bytes: null,
    labels: JSON.stringify(body.labels ?? {}),
    created_by: userId,
    created_at: now,
    updated_at: now,
    docker_image: null,
    image_digest: null,
    registry_id: null,
    base_snapshot_id: await manager.imageSnapshotOf(box),
  };
  await ctx.db.insertInto("sandbox_snapshots").values(row).execute();
  try {
    if (!manager.driver) throw new Error("no sandbox driver");
    const { sizeBytes, usedBytes } = await manager.driver.snapshot(
      box.id,
      manager.snapshotPath(id),
      manager.runtimeRefOf(box),
    );
    await ctx.db
      .updateTable("sandbox_snapshots")
      .set({ status: "ready", fs_used_bytes: usedBytes, size_bytes: sizeBytes, updated_at: nowIso() })
      .where("id", "=", id)
      .execute();
  } catch (err) {
    await ctx.db
      .updateTable("sandbox_snapshots")
      .set({ status: "failed", status_message: `Snapshot failed: ${(err as Error).message}`, updated_at: nowIso() })
      .where("id", "=", id)
      .execute();
  }
  return (await ctx.db.selectFrom("sandbox_snapshots").selectAll().where("id", "=", id).executeTakeFirst())!;
}
