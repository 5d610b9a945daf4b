import { z } from "zod";
import { HttpError, invalidAt } from "../../http/errors.ts";
import { revokeApiKey } from "../../identity/api-keys.ts";
import { nowIso } from "../../store/database.ts";
import { getDeploymentRow } from "../store/deployment-store.ts";
import { bulkDeleteQuery, UUIDISH } from "./schemas.ts";
import { releaseProxyConfig } from "./deployment-proxy-config.ts";
import { deploymentNotFound, deploymentParams, TAGS, type RouteDeps } from "./route-support.ts";

/** Deleting deployments, one or several. */

/** Stops and removes a deployment of the workspace; false when it has none of that id. */
async function deleteDeployment(d: RouteDeps, workspaceId: string, id: string): Promise<boolean> {
  const { ctx, db, engine } = d;
  const row = await getDeploymentRow(db, workspaceId, id);
  if (!row) return false;
  await db
    .updateTable("deployments")
    .set({ status: "AWAITING_DELETE", updated_at: nowIso() })
    .where("id", "=", id)
    .execute();
  const revisions = await db.selectFrom("deployment_revisions").select("id").where("deployment_id", "=", id).execute();
  await db.updateTable("deployment_revisions").set({ cancel_requested: 1 }).where("deployment_id", "=", id).execute();
  await engine().forget(
    id,
    revisions.map((r) => r.id),
  );
  // Gone on this machine before the answer: a server start racing the deletion included.
  await engine().runtime.purge(id);
  await revokeApiKey(db, workspaceId, row.api_key_id);
  await db.deleteFrom("deployments").where("id", "=", id).execute();
  await releaseProxyConfig(db, workspaceId, row.proxy_config);
  for (const r of revisions) engine().removeBuild(r.id);
  ctx.log.info({ deployment: id }, "deployment deleted");
  return true;
}

/** DELETE /deployments?deployment_ids=… */
export function registerBulkDeleteRoute(d: RouteDeps): void {
  const { router } = d;

  router.add({
    method: "delete",
    path: "/deployments",
    summary: "Delete several deployments (200 when all were deleted, 207 when some were not found)",
    tags: TAGS,
    query: bulkDeleteQuery,
    responses: {
      200: { description: "All deleted" },
      207: { description: "Some deleted" },
      404: { description: "None found" },
    },
    handler: async ({ c, principal, query }) => {
      const ids = (Array.isArray(query.deployment_ids) ? query.deployment_ids : [query.deployment_ids])
        .flatMap((s) => s.split(","))
        .map((s) => s.trim())
        .filter(Boolean);
      if (ids.length === 0 || ids.length > 100 || ids.some((i) => !UUIDISH.test(i)))
        throw invalidAt(["query", "deployment_ids"], "Input should be 1 to 100 deployment UUIDs");
      const deleted: string[] = [];
      const notFoundIds: string[] = [];
      for (const id of [...new Set(ids)]) {
        if (await deleteDeployment(d, principal.workspaceId, id)) deleted.push(id);
        else notFoundIds.push(id);
      }
      if (deleted.length === 0) throw new HttpError(404, `Deployment IDs ${notFoundIds.join(", ")} not found.`);
      return c.json({ deleted, not_found: notFoundIds }, notFoundIds.length ? 207 : 200);
    },
  });
}

/** DELETE /deployments/{id}. */
export function registerDeleteRoute(d: RouteDeps): void {
  const { router } = d;

  router.add({
    method: "delete",
    path: "/deployments/:deployment_id",
    summary: "Delete a deployment: stops its agent servers and removes its revisions and builds",
    tags: TAGS,
    params: deploymentParams,
    query: z.object({ delete_tracing_project: z.enum(["true", "false"]).optional() }),
    responses: { 204: { description: "Deleted" }, 404: { description: "Not found" } },
    handler: async ({ c, principal, params }) => {
      if (!(await deleteDeployment(d, principal.workspaceId, params.deployment_id)))
        throw deploymentNotFound(params.deployment_id);
      return c.body(null, 204);
    },
  });
}
