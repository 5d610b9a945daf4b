import { prepareProxyConfig, type StoredProxyConfig } from "../../egress/index.ts";
import { badRequest, conflict } from "../../http/errors.ts";
import type { Router } from "../../http/route.ts";
import type { PlatformContext } from "../../platform/context.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import { nowIso } from "../../store/database.ts";
import { answerAtOwner } from "./at-owner.ts";
import { presentSandbox } from "./present.ts";
import { getSandbox, nameContains, type SandboxRow } from "../store/sandbox-store.ts";
import { boxParams, listQuery, patchBody } from "./schemas.ts";
import { cpuOf, isUniqueViolation, record, sandboxLoader, TAGS } from "./route-support.ts";

/** `/sandboxes/boxes` and `/sandboxes/boxes/{name}`: list, read, change and delete sandboxes. */
export function registerBoxRoutes(router: Router, ctx: PlatformContext, manager: SandboxManager): void {
  registerBoxReads(router, ctx, manager);
  registerBoxPatch(router, ctx, manager);
  registerBoxDelete(router, ctx, manager);
}

function registerBoxReads(router: Router, ctx: PlatformContext, manager: SandboxManager): void {
  const base = () => ctx.baseUrl();
  const load = sandboxLoader(ctx, manager);
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
}

function registerBoxPatch(router: Router, ctx: PlatformContext, manager: SandboxManager): void {
  const base = () => ctx.baseUrl();
  const load = sandboxLoader(ctx, manager);
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
}

function registerBoxDelete(router: Router, ctx: PlatformContext, manager: SandboxManager): void {
  const load = sandboxLoader(ctx, manager);
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
}
