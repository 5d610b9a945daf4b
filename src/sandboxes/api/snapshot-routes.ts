import { z } from "zod";
import { badRequest, conflict, notFound } from "../../http/errors.ts";
import type { Router } from "../../http/route.ts";
import type { PlatformContext } from "../../platform/context.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import { answerAtOwner } from "./at-owner.ts";
import { presentSnapshot } from "./present.ts";
import { findSnapshot, listSnapshots } from "../store/sandbox-store.ts";
import { boxParams, snapshotBody, snapshotListQuery } from "./schemas.ts";
import { takeSnapshot } from "../images/snapshots.ts";
import { isUniqueViolation, record, sandboxLoader, TAGS } from "./route-support.ts";

/** Snapshots: captured from a sandbox, listed, read by id or name, deleted. */
export function registerSnapshotRoutes(router: Router, ctx: PlatformContext, manager: SandboxManager): void {
  registerSnapshotCapture(router, ctx, manager);
  registerSnapshotReads(router, ctx);
  registerSnapshotDelete(router, ctx, manager);
}

const snapParams = z.object({ id: z.string().min(1).max(200) });

function registerSnapshotCapture(router: Router, ctx: PlatformContext, manager: SandboxManager): void {
  const load = sandboxLoader(ctx, manager);
  router.add({
    method: "post",
    path: "/sandboxes/boxes/:name/snapshot",
    summary: "Capture the sandbox's filesystem as a snapshot",
    tags: TAGS,
    params: boxParams,
    body: snapshotBody,
    responses: {
      201: { description: "The snapshot (status building, then ready)", schema: record },
      409: { description: "Name and tag in use" },
    },
    handler: async ({ c, principal, params, body }) => {
      const row = await load(principal.workspaceId, params.name);
      const remote = await answerAtOwner(ctx, c, row);
      if (remote) return remote;
      if (!["ready", "stopped"].includes(row.status))
        throw badRequest(`Sandbox ${row.name} cannot be snapshotted while ${row.status}`);
      const snap = await takeSnapshot(ctx, manager, row, principal.userId, body).catch((err) => {
        if (isUniqueViolation(err)) throw conflict(`A snapshot named ${body.name}:${body.tag} already exists`);
        throw err;
      });
      return c.json(presentSnapshot(snap), 201);
    },
  });
}

function registerSnapshotReads(router: Router, ctx: PlatformContext): void {
  router.add({
    method: "get",
    path: "/sandboxes/snapshots",
    summary: "List snapshots",
    tags: TAGS,
    query: snapshotListQuery,
    responses: { 200: { description: "Snapshots and the offset", schema: record } },
    handler: async ({ c, principal, query }) => {
      const rows = await listSnapshots(ctx.db, principal.workspaceId, query);
      return c.json({ snapshots: rows.map(presentSnapshot), offset: query.offset + rows.length });
    },
  });

  // By id and by name (`name` or `name:tag`): one lookup serves both paths.
  for (const [path, summary] of [
    ["/sandboxes/snapshots/:id", "Get a snapshot"],
    ["/sandboxes/snapshots-by-name/:id", "Get a snapshot by name (name or name:tag)"],
  ] as const) {
    router.add({
      method: "get",
      path,
      summary,
      tags: TAGS,
      params: snapParams,
      responses: { 200: { description: "The snapshot", schema: record }, 404: { description: "Not found" } },
      handler: async ({ c, principal, params }) => {
        const snap = await findSnapshot(ctx.db, principal.workspaceId, params.id);
        if (!snap) throw notFound("Snapshot");
        return c.json(presentSnapshot(snap));
      },
    });
  }
}

function registerSnapshotDelete(router: Router, ctx: PlatformContext, manager: SandboxManager): void {
  router.add({
    method: "delete",
    path: "/sandboxes/snapshots/:id",
    summary: "Delete a snapshot",
    tags: TAGS,
    params: snapParams,
    responses: { 204: { description: "Deleted" }, 404: { description: "Not found" } },
    handler: async ({ c, principal, params }) => {
      const snap = await findSnapshot(ctx.db, principal.workspaceId, params.id);
      if (!snap) throw notFound("Snapshot");
      if (snap.docker_image) {
        // An image is the filesystem under its sandboxes and captures: it goes after them.
        const user = await ctx.db
          .selectFrom("sandboxes")
          .select("name")
          .where("snapshot_id", "=", snap.id)
          .executeTakeFirst();
        const capture = await ctx.db
          .selectFrom("sandbox_snapshots")
          .select("name")
          .where("base_snapshot_id", "=", snap.id)
          .executeTakeFirst();
        if (user || capture)
          throw conflict(
            `Snapshot ${snap.name} is in use by ${user ? `sandbox ${user.name}` : `snapshot ${capture!.name}`}; delete that first`,
          );
      }
      await ctx.db.deleteFrom("sandbox_snapshots").where("id", "=", snap.id).execute();
      manager.removeSnapshotFile(snap.id);
      return c.body(null, 204);
    },
  });
}
