import { z } from "zod";
import { HttpError } from "../../http/errors.ts";
import type { Router } from "../../http/route.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { getDeploymentRow, getRevisionRow } from "../store/deployment-store.ts";
import { queryLogs, type LogFilter } from "../store/log-query.ts";
import type { LogKind } from "../store/revision-logs.ts";
import { idParam, logsPage, logsQuery } from "./schemas.ts";

const TAGS = ["deployments"];

const isoTime = z
  .string()
  .max(64)
  .refine((v) => !Number.isNaN(Date.parse(v)), "Input should be an ISO 8601 date and time")
  .transform((v) => new Date(v).toISOString());

/**
 * What the official deploy CLIs POST: paging (`offset`, `limit`, `order`) and the filters of their
 * `logs` command. Unknown fields are accepted and ignored so that client updates do not break.
 */
export const projectLogsBody = logsQuery
  .extend({
    offset: logsQuery.shape.offset.nullable(),
    level: z.string().max(32).nullish(),
    query: z.string().max(1000).nullish(),
    start_time: isoTime.nullish(),
    end_time: isoTime.nullish(),
  })
  .loose();

export function filterOf(body: z.infer<typeof projectLogsBody>): LogFilter {
  return {
    level: body.level ?? undefined,
    query: body.query || undefined,
    since: body.start_time ?? undefined,
    until: body.end_time ?? undefined,
  };
}

/**
 * LangSmith Deployment's CLIs (`langgraph deploy`, `langgraphjs deploy`) query logs on
 * `/v1/projects/{project_id}/…` with POST (a project is a deployment): per revision, and the
 * runtime log of the whole deployment (`deploy logs` without `--revision-id`: every revision's
 * server, in order).
 */
export function registerProjectLogRoutes(router: Router, ctx: PlatformContext): void {
  const db = ctx.db;
  const revisionParams = z.object({ project_id: idParam, revision_id: idParam });
  const responses = {
    200: { description: "Log lines (next_offset: the last line's id, null on an empty page)", schema: logsPage },
    404: { description: "Not found" },
  };
  for (const kind of ["build", "deploy"] as LogKind[]) {
    router.add({
      method: "post",
      path: `/projects/:project_id/revisions/:revision_id/${kind}_logs`,
      summary: `Read a revision's ${kind} log (LangSmith Deployment's v1 path; project = deployment)`,
      tags: TAGS,
      params: revisionParams,
      body: projectLogsBody,
      bodyOptional: true,
      responses,
      handler: async ({ c, principal, params, body }) => {
        const rev = await getRevisionRow(db, principal.workspaceId, params.project_id, params.revision_id);
        if (!rev) throw new HttpError(404, `Revision ID ${params.revision_id} not found.`);
        return c.json(
          await queryLogs(db, [rev.id], kind, {
            after: body.offset,
            limit: body.limit,
            order: body.order,
            filter: filterOf(body),
          }),
        );
      },
    });
  }
  router.add({
    method: "post",
    path: "/projects/:project_id/deploy_logs",
    summary: "Read a deployment's runtime log across its revisions (LangSmith Deployment's v1 path)",
    tags: TAGS,
    params: z.object({ project_id: idParam }),
    body: projectLogsBody,
    bodyOptional: true,
    responses,
    handler: async ({ c, principal, params, body }) => {
      const dep = await getDeploymentRow(db, principal.workspaceId, params.project_id);
      if (!dep) throw new HttpError(404, `Deployment ID ${params.project_id} not found.`);
      const revisions = await db
        .selectFrom("deployment_revisions")
        .select("id")
        .where("deployment_id", "=", dep.id)
        .where("workspace_id", "=", principal.workspaceId)
        .execute();
      return c.json(
        await queryLogs(
          db,
          revisions.map((r) => r.id),
          "deploy",
          { after: body.offset, limit: body.limit, order: body.order, filter: filterOf(body) },
        ),
      );
    },
  });
}
