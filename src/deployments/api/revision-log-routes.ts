import { z } from "zod";
import { getRevisionRow } from "../store/deployment-store.ts";
import { readLogs, type LogKind } from "../store/revision-logs.ts";
import { logsPage, logsQuery } from "./schemas.ts";
import { revisionNotFound, revisionParams, TAGS, type RouteDeps } from "./route-support.ts";

/** A revision's build and deploy logs and its status history. */
export function registerRevisionLogRoutes(d: RouteDeps): void {
  const { router, db } = d;

  for (const kind of ["build", "deploy"] as LogKind[]) {
    router.add({
      method: "get",
      path: `/deployments/:deployment_id/revisions/:revision_id/${kind}_logs`,
      summary: `Read a revision's ${kind} log (pages: pass next_offset as offset)`,
      tags: TAGS,
      params: revisionParams,
      query: logsQuery,
      responses: { 200: { description: "Log lines", schema: logsPage }, 404: { description: "Not found" } },
      handler: async ({ c, principal, params, query }) => {
        const rev = await getRevisionRow(db, principal.workspaceId, params.deployment_id, params.revision_id);
        if (!rev) throw revisionNotFound(params.revision_id);
        return c.json(
          await readLogs(db, rev.id, kind, { after: query.offset ?? null, limit: query.limit, order: query.order }),
        );
      },
    });
  }

  router.add({
    method: "get",
    path: "/deployments/:deployment_id/revisions/:revision_id/transitions",
    summary: "A revision's status history with timestamps",
    tags: TAGS,
    params: revisionParams,
    responses: {
      200: {
        description: "Transitions",
        schema: z.array(
          z.object({
            from_status: z.string().nullable(),
            to_status: z.string(),
            reason: z.string().nullable(),
            at: z.string(),
          }),
        ),
      },
    },
    handler: async ({ c, principal, params }) => {
      const rev = await getRevisionRow(db, principal.workspaceId, params.deployment_id, params.revision_id);
      if (!rev) throw revisionNotFound(params.revision_id);
      const rows = await db
        .selectFrom("deployment_revision_transitions")
        .select(["from_status", "to_status", "reason", "at"])
        .where("revision_id", "=", rev.id)
        .orderBy("at")
        .orderBy("id")
        .execute();
      return c.json(rows);
    },
  });
}
