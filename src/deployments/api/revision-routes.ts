import { z } from "zod";
import { HttpError } from "../../http/errors.ts";
import { nowIso } from "../../store/database.ts";
import { getDeploymentRow, getRevisionRow, listRevisionRows, toRevisionRecord } from "../store/deployment-store.ts";
import type { RevisionPlan } from "../rollout/revision-plan.ts";
import { transition, TERMINAL_STATUSES, LostRevision, type RevisionStatus } from "../rollout/revision-states.ts";
import { deploymentRecord, listRevisionsQuery, revisionRecord } from "./schemas.ts";
import {
  deploymentParams,
  insertRevision,
  revisionNotFound,
  revisionParams,
  TAGS,
  type RouteDeps,
} from "./route-support.ts";

/** A deployment's revisions: list, get, redeploy, interrupt. */
export function registerRevisionRoutes(d: RouteDeps): void {
  registerRevisionReadRoutes(d);
  registerRedeployRoute(d);
  registerInterruptRoute(d);
}

/** GET a deployment's revisions, or one of them. */
function registerRevisionReadRoutes(d: RouteDeps): void {
  const { router, db, requireDeployment } = d;

  router.add({
    method: "get",
    path: "/deployments/:deployment_id/revisions",
    summary: "List a deployment's revisions, latest first",
    tags: TAGS,
    params: deploymentParams,
    query: listRevisionsQuery,
    responses: {
      200: { description: "Revisions", schema: z.object({ resources: z.array(revisionRecord), offset: z.number() }) },
      404: { description: "Not found" },
    },
    handler: async ({ c, principal, params, query }) => {
      await requireDeployment(principal.workspaceId, params.deployment_id);
      const statuses = query.status
        ?.split(",")
        .map((s) => s.trim())
        .filter(Boolean);
      const rows = await listRevisionRows(db, params.deployment_id, {
        limit: query.limit,
        offset: query.offset,
        statuses,
      });
      return c.json({ resources: rows.map(toRevisionRecord), offset: query.offset + rows.length });
    },
  });

  router.add({
    method: "get",
    path: "/deployments/:deployment_id/revisions/:revision_id",
    summary: "Get a revision (poll its status until DEPLOYED)",
    tags: TAGS,
    params: revisionParams,
    responses: { 200: { description: "Revision", schema: revisionRecord }, 404: { description: "Not found" } },
    handler: async ({ c, principal, params }) => {
      const rev = await getRevisionRow(db, principal.workspaceId, params.deployment_id, params.revision_id);
      if (!rev) throw revisionNotFound(params.revision_id);
      return c.json(toRevisionRecord(rev));
    },
  });
}

/** POST …/redeploy: a new revision that reuses a revision's build (rollback without rebuilding). */
function registerRedeployRoute(d: RouteDeps): void {
  const { router, ctx, db, record, queue, requireDeployment } = d;

  router.add({
    method: "post",
    path: "/deployments/:deployment_id/revisions/:revision_id/redeploy",
    summary: "Redeploy a revision's build (rollback without rebuilding): a new revision that reuses it",
    tags: TAGS,
    params: revisionParams,
    responses: {
      200: { description: "The deployment, its latest revision being the redeploy", schema: deploymentRecord },
      400: { description: "Nothing to redeploy" },
      404: { description: "Not found" },
    },
    handler: async ({ c, principal, params }) => {
      const ws = principal.workspaceId;
      const row = await requireDeployment(ws, params.deployment_id);
      const target = await getRevisionRow(db, ws, params.deployment_id, params.revision_id);
      if (!target) throw revisionNotFound(params.revision_id);
      if (!target.project_dir)
        throw new HttpError(400, `Revision ${target.id} has no build to redeploy (its status is ${target.status})`);
      const plan: RevisionPlan = {
        source: target.source,
        sourceRevisionConfig: JSON.parse(target.source_revision_config),
        buildConfig: JSON.parse(target.build_config),
      };
      const now = nowIso();
      let revisionId = "";
      await db.transaction().execute(async (tx) => {
        revisionId = await insertRevision(tx, row.id, ws, plan, target.id, now);
        await tx
          .updateTable("deployments")
          .set({
            latest_revision_id: revisionId,
            source_revision_config: target.source_revision_config,
            updated_at: now,
          })
          .where("id", "=", row.id)
          .execute();
      });
      await queue(row.id, revisionId);
      ctx.log.info({ deployment: row.id, revision: revisionId, of: target.id }, "redeploy requested");
      return c.json(await record((await getDeploymentRow(db, ws, row.id))!));
    },
  });
}

/** POST …/interrupt: a revision that is not finished ends INTERRUPTED. */
function registerInterruptRoute(d: RouteDeps): void {
  const { router, db, engine } = d;

  router.add({
    method: "post",
    path: "/deployments/:deployment_id/revisions/:revision_id/interrupt",
    summary: "Interrupt a revision that is not finished (it ends INTERRUPTED; the live revision keeps serving)",
    tags: TAGS,
    params: revisionParams,
    responses: {
      200: { description: "Revision", schema: revisionRecord },
      400: { description: "Already finished" },
      404: { description: "Not found" },
    },
    handler: async ({ c, principal, params }) => {
      const ws = principal.workspaceId;
      const rev = await getRevisionRow(db, ws, params.deployment_id, params.revision_id);
      if (!rev) throw revisionNotFound(params.revision_id);
      if (TERMINAL_STATUSES.has(rev.status as RevisionStatus))
        throw new HttpError(400, `Revision ${rev.id} is already ${rev.status}`);
      await db.updateTable("deployment_revisions").set({ cancel_requested: 1 }).where("id", "=", rev.id).execute();
      if (!engine().abortRollout(rev.id, "cancel") && !rev.owner) {
        await transition(db, rev.id, [rev.status as RevisionStatus], "INTERRUPTED", {
          owner: null,
          reason: "interrupted on request",
          set: { status_message: "Interrupted on request" },
        }).catch((err) => {
          if (!(err instanceof LostRevision)) throw err;
        });
      }
      // A rollout in this or another process notices the request at its next step.
      const deadline = Date.now() + 5000;
      let now = (await getRevisionRow(db, ws, params.deployment_id, params.revision_id))!;
      while (!TERMINAL_STATUSES.has(now.status as RevisionStatus) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 50));
        now = (await getRevisionRow(db, ws, params.deployment_id, params.revision_id))!;
      }
      return c.json(toRevisionRecord(now));
    },
  });
}
