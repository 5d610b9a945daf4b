import { z } from "zod";
import { HttpError } from "../../http/errors.ts";
import type { Router } from "../../http/route.ts";
import { auditEntrySchema, egressLog } from "../../egress/index.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { getDeploymentRow } from "../store/deployment-store.ts";
import { buildEgressId, serverEgressId } from "../confinement/egress-plan.ts";
import { idParam } from "./schemas.ts";

/** An egress audit row of a deployment: which revision, and its agent server or a build step. */
const entry = auditEntrySchema.extend({ revision_id: z.string(), process: z.enum(["server", "build"]) });

/**
 * `GET /v2/deployments/{id}/egress-log`: what the egress proxy did for the deployment's agent
 * servers and build steps (injections, blocks, tunnels, signings), newest first, each row naming
 * its revision and process; the sandboxes' egress-log shape, never a credential value.
 */
export function registerEgressLogRoute(router: Router, ctx: PlatformContext): void {
  router.add({
    method: "get",
    path: "/deployments/:deployment_id/egress-log",
    summary:
      "The deployment's egress audit log: injections, blocks, raw tunnels of its agent servers and build steps (newest first; never a credential value)",
    tags: ["deployments"],
    params: z.object({ deployment_id: idParam }),
    query: z.object({
      limit: z.coerce.number().int().min(1).max(1000).default(100),
      before: z.string().max(64).optional(),
      kind: z.enum(["inject", "block", "tunnel", "sign", "callback", "credential"]).optional(),
      revision_id: idParam.optional(),
    }),
    responses: {
      200: {
        description: "Audit entries",
        schema: z.object({ entries: z.array(entry), next_before: z.string().nullable() }),
      },
      404: { description: "Not found" },
    },
    handler: async ({ c, principal, params, query }) => {
      const row = await getDeploymentRow(ctx.db, principal.workspaceId, params.deployment_id);
      if (!row) throw new HttpError(404, `Deployment ID ${params.deployment_id} not found.`);
      let revisions = (
        await ctx.db.selectFrom("deployment_revisions").select("id").where("deployment_id", "=", row.id).execute()
      ).map((r) => r.id);
      if (query.revision_id) revisions = revisions.filter((r) => r === query.revision_id);
      const targets = new Map<string, { revision_id: string; process: "server" | "build" }>();
      for (const r of revisions) {
        targets.set(serverEgressId(r), { revision_id: r, process: "server" });
        targets.set(buildEgressId(r), { revision_id: r, process: "build" });
      }
      const rows = await egressLog(ctx.db, principal.workspaceId, [...targets.keys()], {
        limit: query.limit,
        before: query.before,
        kind: query.kind,
      });
      const entries = rows.map(({ target, id, ...r }) => ({ id, ...targets.get(target)!, ...r }));
      return c.json({ entries, next_before: entries.length === query.limit ? entries[entries.length - 1].id : null });
    },
  });
}
