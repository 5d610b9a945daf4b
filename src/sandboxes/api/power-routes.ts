import { z } from "zod";
import { badRequest, HttpError } from "../../http/errors.ts";
import type { Router } from "../../http/route.ts";
import type { PlatformContext } from "../../platform/context.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import { answerAtOwner } from "./at-owner.ts";
import { presentSandbox } from "./present.ts";
import { transition } from "../store/sandbox-store.ts";
import { boxParams } from "./schemas.ts";
import { record, sandboxLoader, TAGS } from "./route-support.ts";

/** `/sandboxes/boxes/{name}/stop` and `/start`. */
export function registerPowerRoutes(router: Router, ctx: PlatformContext, manager: SandboxManager): void {
  const base = () => ctx.baseUrl();
  const load = sandboxLoader(ctx, manager);
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
}
