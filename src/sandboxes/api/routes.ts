import crypto from "node:crypto";
import { z } from "zod";
import { prepareProxyConfig, type StoredProxyConfig } from "../../egress/index.ts";
import { badRequest, conflict, HttpError, invalidAt, notFound } from "../../http/errors.ts";
import type { Router } from "../../http/route.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import { answerAtOwner } from "./at-owner.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import { presentSandbox, presentSnapshot } from "./present.ts";
import {
  findSandbox,
  findSnapshot,
  getSandbox,
  listSnapshots,
  nameContains,
  sealEnv,
  transition,
  type SandboxRow,
} from "../store/sandbox-store.ts";
import { boxParams, createBody, DEFAULTS, listQuery, patchBody, snapshotBody, snapshotListQuery } from "./schemas.ts";
import { takeSnapshot } from "../images/snapshots.ts";

const record = z.record(z.string(), z.unknown());
const TAGS = ["sandboxes"];

function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e.code === "23505" || /UNIQUE constraint failed/i.test(e.message ?? "");
}

/** cpu_millicores wins over vcpus; each is derived from the other when only one is given. */
function cpuOf(
  b: { vcpus?: number; cpu_millicores?: number },
  current?: { vcpus: number; cpu_millicores: number },
): { vcpus: number; cpu_millicores: number } {
  if (b.cpu_millicores !== undefined)
    return { cpu_millicores: b.cpu_millicores, vcpus: Math.max(1, Math.ceil(b.cpu_millicores / 1000)) };
  if (b.vcpus !== undefined) return { vcpus: b.vcpus, cpu_millicores: b.vcpus * 1000 };
  return current ?? { vcpus: DEFAULTS.vcpus, cpu_millicores: DEFAULTS.vcpus * 1000 };
}

export function registerSandboxRoutes(router: Router, ctx: PlatformContext, manager: SandboxManager): void {
  const base = () => ctx.baseUrl();
  /** Reads do not count as activity (a client polling status must not keep a sandbox awake); changes do. */
  const load = async (workspaceId: string, name: string, activity = true): Promise<SandboxRow> => {
    const row = await findSandbox(ctx.db, workspaceId, name);
    if (!row) throw notFound("Sandbox");
    if (activity) manager.touch(row.id);
    return row;
  };

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
      let snapshotId: string | null = null;
      let fromImage = false;
      const snapshotRef = body.snapshot_id ?? body.snapshot_name ?? body.snapshot;
      if (snapshotRef) {
        const snap = await findSnapshot(ctx.db, principal.workspaceId, snapshotRef);
        const loc = body.snapshot_id ? "snapshot_id" : body.snapshot_name ? "snapshot_name" : "snapshot";
        if (!snap) throw invalidAt(["body", loc], `Snapshot ${snapshotRef} not found`);
        if (snap.status !== "ready")
          throw invalidAt(["body", loc], `Snapshot ${snapshotRef} is ${snap.status}, not ready`);
        snapshotId = snap.id;
        fromImage = Boolean(snap.docker_image);
      }
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
          try {
            await ctx.db.insertInto("sandboxes").values(row).execute();
          } catch (err) {
            // Not awaited: the warm sandbox may still be starting, and other admissions wait for this one.
            manager
              .releaseWarm(id)
              .catch((e) => ctx.log.warn({ id, err: (e as Error).message }, "claimed warm sandbox not given back"));
            if (isUniqueViolation(err)) throw conflict(`A sandbox named ${row.name} already exists`);
            throw err;
          }
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

  router.add({
    method: "get",
    path: "/sandboxes/boxes",
    summary: "List sandboxes",
    tags: TAGS,
    query: listQuery,
    responses: { 200: { description: "Sandboxes and the offset", schema: record } },
    handler: async ({ c, principal, query }) => {
      let q = ctx.db.selectFrom("sandboxes").selectAll().where("workspace_id", "=", principal.workspaceId);
      if (query.status) q = q.where("status", "=", query.status);
      if (query.created_by === "me") q = q.where("created_by", "=", principal.userId);
      if (query.name_contains) q = q.where(nameContains(query.name_contains));
      const rows = await q.orderBy(query.sort_by, query.sort_direction).orderBy("id", query.sort_direction).execute();
      const wanted = (Array.isArray(query.label) ? query.label : query.label ? [query.label] : []).map((l) => {
        const i = l.indexOf("=");
        return i < 0 ? { key: l, value: undefined } : { key: l.slice(0, i), value: l.slice(i + 1) };
      });
      const matching = rows.filter((r) => {
        const labels = JSON.parse(r.labels) as Record<string, string>;
        return wanted.every((w) => w.key in labels && (w.value === undefined || labels[w.key] === w.value));
      });
      const page = matching.slice(query.offset, query.offset + query.limit);
      return c.json({ sandboxes: page.map((r) => presentSandbox(r, base())), offset: query.offset + page.length });
    },
  });

  router.add({
    method: "get",
    path: "/sandboxes/boxes/:name",
    summary: "Get a sandbox by name or id",
    tags: TAGS,
    params: boxParams,
    responses: { 200: { description: "The sandbox", schema: record }, 404: { description: "Not found" } },
    handler: async ({ c, principal, params }) =>
      c.json(presentSandbox(await load(principal.workspaceId, params.name, false), base())),
  });

  router.add({
    method: "get",
    path: "/sandboxes/boxes/:name/status",
    summary: "Status of a sandbox (for polling)",
    tags: TAGS,
    params: boxParams,
    responses: { 200: { description: "status and status_message", schema: record } },
    handler: async ({ c, principal, params }) => {
      const row = await load(principal.workspaceId, params.name, false);
      return c.json({ status: row.status, status_message: row.status_message });
    },
  });

  router.add({
    method: "patch",
    path: "/sandboxes/boxes/:name",
    summary: "Rename a sandbox, change its TTLs, resources, labels or proxy_config (replaced whole)",
    tags: TAGS,
    params: boxParams,
    body: patchBody,
    responses: {
      200: { description: "The sandbox", schema: record },
      400: { description: "proxy_config on a sandbox that is not ready" },
      409: { description: "Name in use" },
    },
    handler: async ({ c, principal, params, body }) => {
      const row = await load(principal.workspaceId, params.name);
      const remote = await answerAtOwner(ctx, c, row);
      if (remote) return remote;
      manager.admissions.checkResize(body.mem_bytes);
      const set: Partial<SandboxRow> = { updated_at: nowIso(), updated_by: principal.userId };
      if (body.name !== undefined) set.name = body.name;
      if (body.vcpus !== undefined || body.cpu_millicores !== undefined) Object.assign(set, cpuOf(body, row));
      if (body.mem_bytes !== undefined) set.mem_bytes = body.mem_bytes;
      if (body.fs_capacity_bytes !== undefined) set.fs_capacity_bytes = body.fs_capacity_bytes;
      if (body.idle_ttl_seconds !== undefined) set.idle_ttl_seconds = body.idle_ttl_seconds;
      if (body.delete_after_stop_seconds !== undefined) set.delete_after_stop_seconds = body.delete_after_stop_seconds;
      if (body.labels !== undefined) set.labels = JSON.stringify(body.labels);
      let newProxy: StoredProxyConfig | null | undefined;
      if (body.proxy_config !== undefined) {
        if (row.status !== "ready")
          throw badRequest(
            `Sandbox ${row.name} is not ready (status: ${row.status}); start it before changing proxy_config`,
          );
        newProxy = body.proxy_config
          ? await prepareProxyConfig({ db: ctx.db, box: ctx.box }, principal.workspaceId, body.proxy_config)
          : null;
        set.proxy_config = newProxy ? JSON.stringify(newProxy) : null;
      }
      try {
        await ctx.db.updateTable("sandboxes").set(set).where("id", "=", row.id).execute();
      } catch (err) {
        if (isUniqueViolation(err)) throw conflict(`A sandbox named ${body.name} already exists`);
        throw err;
      }
      const updated = (await getSandbox(ctx.db, row.id))!;
      if (newProxy !== undefined) await manager.updateEgress(updated, newProxy);
      return c.json(presentSandbox(updated, base()));
    },
  });

  router.add({
    method: "delete",
    path: "/sandboxes/boxes/:name",
    summary: "Delete a sandbox (by name or id), whatever its state",
    tags: TAGS,
    params: boxParams,
    responses: { 204: { description: "Deleted" }, 404: { description: "Not found" } },
    handler: async ({ c, principal, params }) => {
      const row = await load(principal.workspaceId, params.name);
      const remote = await answerAtOwner(ctx, c, row);
      if (remote) return remote;
      await manager.delete(row);
      return c.body(null, 204);
    },
  });

  router.add({
    method: "post",
    path: "/sandboxes/boxes/:name/stop",
    summary: "Stop a ready sandbox; its filesystem is kept",
    tags: TAGS,
    params: boxParams,
    body: record,
    bodyOptional: true,
    responses: { 204: { description: "Stopped" }, 400: { description: "Not ready" } },
    handler: async ({ c, principal, params }) => {
      const row = await load(principal.workspaceId, params.name);
      if (row.status === "stopped") return c.body(null, 204);
      const remote = await answerAtOwner(ctx, c, row);
      if (remote) return remote;
      if (row.status !== "ready") throw badRequest(`Sandbox ${row.name} cannot be stopped while ${row.status}`);
      await manager.stop(row, null);
      return c.body(null, 204);
    },
  });

  router.add({
    method: "post",
    path: "/sandboxes/boxes/:name/start",
    summary: "Start a stopped or failed sandbox",
    tags: TAGS,
    params: boxParams,
    body: z
      .object({ wait_for_ready: z.boolean().default(true), timeout: z.number().min(0).max(3600).default(30) })
      .passthrough(),
    bodyOptional: true,
    responses: { 202: { description: "The sandbox", schema: record }, 400: { description: "Not stopped" } },
    handler: async ({ c, principal, params, body }) => {
      const row = await load(principal.workspaceId, params.name);
      if (row.status === "ready") return c.json(presentSandbox(row, base()), 202);
      // A stopped sandbox's files are on its owner: a live owner starts it, else this replica does.
      const remote = await answerAtOwner(ctx, c, row);
      if (remote) return remote;
      await manager.ensureAvailable();
      const want = { memBytes: Number(row.mem_bytes), fsCapacityBytes: Number(row.fs_capacity_bytes), creates: false };
      const moved = await manager.admissions.admitThen(row.workspace_id, want, () =>
        transition(ctx.db, row.id, ["stopped", "failed"], "provisioning", { runtime: null }),
      );
      if (!moved) throw badRequest(`Sandbox ${row.name} cannot be started while ${row.status}`);
      manager.launch(moved, null);
      if (!body.wait_for_ready) return c.json(presentSandbox(moved, base()), 202);
      const settled = (await manager.waitSettled(row.id, body.timeout * 1000)) ?? moved;
      if (settled.status === "provisioning")
        throw new HttpError(408, `Timeout waiting for sandbox to be ready (last status: ${settled.status})`);
      return c.json(presentSandbox(settled, base()), 202);
    },
  });

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

  const snapParams = z.object({ id: z.string().min(1).max(200) });
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
