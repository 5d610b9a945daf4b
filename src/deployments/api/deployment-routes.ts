import { z } from "zod";
import { invalidAt } from "../../http/errors.ts";
import { listDeploymentRows } from "../store/deployment-store.ts";
import { deploymentRecord, listDeploymentsQuery, UUIDISH } from "./schemas.ts";
import { createUploadUrl } from "./upload-urls.ts";
import { deploymentParams, TAGS, type RouteDeps } from "./route-support.ts";

/** Reading deployments and asking where to upload their sources. */

/** POST /deployments/upload-url. */
export function registerUploadUrlRoute(d: RouteDeps): void {
  const { router, ctx } = d;

  router.add({
    method: "post",
    path: "/deployments/upload-url",
    summary: "Get a signed URL to PUT a source tarball to (then create or patch a deployment with its object_path)",
    tags: TAGS,
    responses: {
      200: {
        description: "Upload URL",
        schema: z.object({ upload_url: z.string(), object_path: z.string(), expires_at: z.string() }),
      },
    },
    handler: ({ c, principal }) => c.json(createUploadUrl(ctx.box, ctx.baseUrl(), principal.workspaceId)),
  });
}

/** GET /deployments. */
export function registerListRoute(d: RouteDeps): void {
  const { router, db, record } = d;

  router.add({
    method: "get",
    path: "/deployments",
    summary: "List deployments",
    tags: TAGS,
    query: listDeploymentsQuery,
    responses: {
      200: {
        description: "Deployments",
        schema: z.object({ resources: z.array(deploymentRecord), offset: z.number() }),
      },
    },
    handler: async ({ c, principal, query }) => {
      const ids = query.deployment_ids
        ?.split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      if (ids?.some((i) => !UUIDISH.test(i)))
        throw invalidAt(["query", "deployment_ids"], "Input should be a comma-separated list of UUIDs");
      const rows = await listDeploymentRows(db, principal.workspaceId, { ...query, ids });
      const resources = await Promise.all(rows.map(record));
      return c.json({ resources, offset: query.offset + resources.length });
    },
  });
}

/** GET /deployments/{id}. */
export function registerGetRoute(d: RouteDeps): void {
  const { router, record, requireDeployment } = d;

  router.add({
    method: "get",
    path: "/deployments/:deployment_id",
    summary: "Get a deployment",
    tags: TAGS,
    params: deploymentParams,
    responses: { 200: { description: "Deployment", schema: deploymentRecord }, 404: { description: "Not found" } },
    handler: async ({ c, principal, params }) =>
      c.json(await record(await requireDeployment(principal.workspaceId, params.deployment_id))),
  });
}

/** POST /deployments/{id}/upload-url. */
export function registerDeploymentUploadUrlRoute(d: RouteDeps): void {
  const { router, ctx, requireDeployment } = d;

  router.add({
    method: "post",
    path: "/deployments/:deployment_id/upload-url",
    summary: "Get a signed URL to PUT this deployment's next source tarball to",
    tags: TAGS,
    params: deploymentParams,
    responses: {
      200: {
        description: "Upload URL",
        schema: z.object({ upload_url: z.string(), object_path: z.string(), expires_at: z.string() }),
      },
      404: { description: "Not found" },
    },
    handler: async ({ c, principal, params }) => {
      await requireDeployment(principal.workspaceId, params.deployment_id);
      return c.json(createUploadUrl(ctx.box, ctx.baseUrl(), principal.workspaceId));
    },
  });
}
