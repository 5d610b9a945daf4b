import type { Kysely } from "kysely";
import { z } from "zod";
import { HttpError, invalidAt, conflict } from "../../http/errors.ts";
import type { Router } from "../../http/route.ts";
import { createApiKey, revokeApiKey } from "../../identity/api-keys.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import type { Database } from "../../store/schema.ts";
import { apiKeyAad, mergeSecrets, openSecrets, sameSecrets, sealSecrets } from "../store/deployment-secrets.ts";
import {
  getDeploymentRow,
  getRevisionRow,
  latestCommitSha,
  listDeploymentRows,
  listRevisionRows,
  toDeploymentRecord,
  toRevisionRecord,
} from "../store/deployment-store.ts";
import type { DeploymentsTable } from "../store/deployments-tables.ts";
import {
  checkBuildable,
  checkSourceConfig,
  checkSourceSupported,
  duplicateSecretNames,
  mergeRevisionConfig,
  type RevisionPlan,
} from "../rollout/revision-plan.ts";
import { readLogs, type LogKind } from "../store/revision-logs.ts";
import { planPatch } from "../rollout/patch-plan.ts";
import {
  recordCreated,
  transition,
  TERMINAL_STATUSES,
  LostRevision,
  type RevisionStatus,
} from "../rollout/revision-states.ts";
import type { RolloutEngine } from "../rollout/rollout-engine.ts";
import {
  bulkDeleteQuery,
  createDeploymentBody,
  deploymentRecord,
  idParam,
  listDeploymentsQuery,
  listRevisionsQuery,
  logsPage,
  logsQuery,
  patchDeploymentBody,
  revisionRecord,
  UUIDISH,
} from "./schemas.ts";
import { createUploadUrl } from "./upload-urls.ts";
import { localSourceRoots } from "../example-deployment.ts";
import { presentStoredProxyConfig, releaseProxyConfig, storedProxyConfig } from "./deployment-proxy-config.ts";
import { registerEgressLogRoute } from "./egress-log-route.ts";

const TAGS = ["deployments"];
const deploymentParams = z.object({ deployment_id: idParam });
const revisionParams = z.object({ deployment_id: idParam, revision_id: idParam });
const deploymentNotFound = (id: string) => new HttpError(404, `Deployment ID ${id} not found.`);
const revisionNotFound = (id: string) => new HttpError(404, `Revision ID ${id} not found.`);

function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e?.code === "23505" || /UNIQUE constraint failed/i.test(e?.message ?? "");
}

/**
 * Inserts a revision in CREATING, points the deployment's `latest_revision_id` at it, and (after
 * the caller's transaction) queues it; waiting older revisions are superseded (SKIPPED).
 */
async function insertRevision(
  tx: Kysely<Database>,
  deploymentId: string,
  workspaceId: string,
  plan: RevisionPlan,
  reuseBuildOf: string | null,
  now: string,
): Promise<string> {
  const id = newId();
  await tx
    .insertInto("deployment_revisions")
    .values({
      id,
      deployment_id: deploymentId,
      workspace_id: workspaceId,
      status: "CREATING",
      source: plan.source,
      source_revision_config: JSON.stringify(plan.sourceRevisionConfig),
      build_config: JSON.stringify(plan.buildConfig),
      reuse_build_of: reuseBuildOf,
      artifact_dir: null,
      project_dir: null,
      graphs: null,
      repo_commit_sha: null,
      owner: null,
      lease_until: null,
      phase_deadline: null,
      attempt: 1,
      cancel_requested: 0,
      pid: null,
      serving_url: null,
      status_message: null,
      created_at: now,
      updated_at: now,
    })
    .execute();
  await recordCreated(tx, id, "CREATING", now);
  return id;
}

export function registerDeploymentRoutes(router: Router, ctx: PlatformContext, engine: () => RolloutEngine): void {
  const db = ctx.db;
  const localSource = { localRoots: localSourceRoots(ctx.config.settings), home: ctx.config.home };

  async function record(row: DeploymentsTable) {
    return {
      ...toDeploymentRecord(row, ctx.baseUrl(), await latestCommitSha(db, row)),
      proxy_config: presentStoredProxyConfig(row.proxy_config),
    };
  }

  async function queue(deploymentId: string, revisionId: string): Promise<void> {
    await transition(db, revisionId, ["CREATING"], "QUEUED", { reason: "queued" });
    await engine().skipOlderWaiting(deploymentId, revisionId);
    engine().kick();
  }

  async function requireDeployment(workspaceId: string, id: string): Promise<DeploymentsTable> {
    const row = await getDeploymentRow(db, workspaceId, id);
    if (!row) throw deploymentNotFound(id);
    return row;
  }

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

  router.add({
    method: "post",
    path: "/deployments",
    summary: "Create a deployment (and its first revision when there is something to build)",
    tags: TAGS,
    body: createDeploymentBody,
    responses: {
      201: { description: "Created", schema: deploymentRecord },
      409: { description: "Name taken" },
      422: { description: "Invalid body" },
    },
    handler: async ({ c, principal, body }) => {
      const ws = principal.workspaceId;
      checkSourceSupported(body.source, ["body", "source"]);
      if (body.secret_references?.length)
        throw invalidAt(
          ["body", "secret_references"],
          "secret_references are for external_docker sources, which this platform does not run",
        );
      checkSourceConfig(body.source_config, null);
      duplicateSecretNames(body.secrets);
      const repoUrl = body.source_config.repo_url ?? null;
      if (body.source === "github" && !repoUrl)
        throw invalidAt(
          ["body", "source_config", "repo_url"],
          "Field required for github sources (the repository's https:// URL)",
          "missing",
        );
      const { merged } = mergeRevisionConfig({}, body.source_revision_config);
      const what = await checkBuildable(merged, repoUrl, {
        workspaceId: ws,
        layout: engine().layout,
        requireSource: false,
        ...localSource,
      });
      if (
        await db
          .selectFrom("deployments")
          .select("id")
          .where("workspace_id", "=", ws)
          .where("name", "=", body.name)
          .executeTakeFirst()
      ) {
        throw conflict(`A deployment named ${body.name} already exists in this workspace`);
      }
      const max = ctx.config.settings.WHARF_DEPLOYMENT_WORKSPACE_MAX;
      const have = await db
        .selectFrom("deployments")
        .select((eb) => eb.fn.countAll<number>().as("n"))
        .where("workspace_id", "=", ws)
        .executeTakeFirstOrThrow();
      if (Number(have.n) >= max)
        throw new HttpError(
          429,
          `Deployment quota reached: this workspace may have ${max} deployments (WHARF_DEPLOYMENT_WORKSPACE_MAX) and has ${Number(have.n)}; delete one first`,
        );
      const id = newId();
      const now = nowIso();
      const sourceConfig = { ...body.source_config, custom_url: null };
      // Last of the checks: it seals the config's opaque values.
      const proxyConfig = (await storedProxyConfig(ctx, ws, body.proxy_config)) ?? null;
      let revisionId: string | null = null;
      try {
        await db.transaction().execute(async (tx) => {
          const { key, summary } = await createApiKey(tx, {
            workspaceId: ws,
            userId: principal.userId,
            name: `deployment:${body.name}`,
          });
          const sealedKey = ctx.box.seal(key, apiKeyAad(ws, id));
          await tx
            .insertInto("deployments")
            .values({
              id,
              workspace_id: ws,
              name: body.name,
              source: body.source,
              source_config: JSON.stringify(sourceConfig),
              source_revision_config: JSON.stringify(merged),
              ...sealSecrets(ctx.box, ws, id, body.secrets),
              api_key_id: summary.id,
              api_key_key_id: sealedKey.keyId,
              api_key_ciphertext: sealedKey.blob,
              status: "READY",
              latest_revision_id: null,
              active_revision_id: null,
              rollout_revision_id: null,
              rollout_owner: null,
              rollout_lease_until: null,
              run_uid: null,
              agent_key_key_id: null,
              agent_key_ciphertext: null,
              proxy_config: proxyConfig,
              created_at: now,
              updated_at: now,
            })
            .execute();
          if (what === "build") {
            const plan: RevisionPlan = {
              source: body.source,
              sourceRevisionConfig: merged,
              buildConfig: {
                repo_url: repoUrl,
                install_command: body.source_config.install_command ?? null,
                build_command: body.source_config.build_command ?? null,
              },
            };
            revisionId = await insertRevision(tx, id, ws, plan, null, now);
            await tx.updateTable("deployments").set({ latest_revision_id: revisionId }).where("id", "=", id).execute();
          }
        });
      } catch (err) {
        await releaseProxyConfig(db, ws, proxyConfig);
        if (isUniqueViolation(err)) throw conflict(`A deployment named ${body.name} already exists in this workspace`);
        throw err;
      }
      if (revisionId) await queue(id, revisionId);
      ctx.log.info({ deployment: id, name: body.name, revision: revisionId }, "deployment created");
      return c.json(await record((await getDeploymentRow(db, ws, id))!), 201);
    },
  });

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
        if (await deleteDeployment(principal.workspaceId, id)) deleted.push(id);
        else notFoundIds.push(id);
      }
      if (deleted.length === 0) throw new HttpError(404, `Deployment IDs ${notFoundIds.join(", ")} not found.`);
      return c.json({ deleted, not_found: notFoundIds }, notFoundIds.length ? 207 : 200);
    },
  });

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

  router.add({
    method: "patch",
    path: "/deployments/:deployment_id",
    summary: "Update a deployment; a new revision when a revision field, the build commands or the secrets change",
    tags: TAGS,
    params: deploymentParams,
    body: patchDeploymentBody,
    responses: {
      200: { description: "Updated deployment", schema: deploymentRecord },
      404: { description: "Not found" },
      422: { description: "Invalid body" },
    },
    handler: async ({ c, principal, params, body }) => {
      const ws = principal.workspaceId;
      const row = await requireDeployment(ws, params.deployment_id);
      if (body.revision_source) checkSourceSupported(body.revision_source, ["body", "revision_source"]);
      if (body.secret_references?.length)
        throw invalidAt(
          ["body", "secret_references"],
          "secret_references are for external_docker sources, which this platform does not run",
        );
      checkSourceConfig(body.source_config, JSON.parse(row.source_config) as Record<string, unknown>);
      let secrets = openSecrets(ctx.box, row);
      let secretsChanged = false;
      if (body.secrets) {
        duplicateSecretNames(body.secrets);
        const m = mergeSecrets(secrets, body.secrets);
        if (m.unknown.length)
          throw invalidAt(
            ["body", "secrets", m.unknown[0], "value"],
            "value may be null only for a secret the deployment already has (null keeps its value)",
          );
        secretsChanged = !sameSecrets(secrets, m.secrets);
        secrets = m.secrets;
      }
      const patch = planPatch(row, body, secretsChanged);
      const { nextSource, merged, sourceChanged } = patch;
      let plan: RevisionPlan | null = null;
      if (patch.newRevision) {
        const what = await checkBuildable(merged, patch.revision.buildConfig.repo_url, {
          workspaceId: ws,
          layout: engine().layout,
          requireSource: sourceChanged,
          ...localSource,
        });
        if (what === "build") plan = patch.revision;
      }
      const reuse = plan ? patch.reuseBuildOf : null;
      const now = nowIso();
      // Last of the checks: it seals the config's opaque values. No new revision: the running one
      // and its build steps take the new rules at once (below).
      const proxyConfig = await storedProxyConfig(ctx, ws, body.proxy_config);
      let revisionId: string | null = null;
      await db.transaction().execute(async (tx) => {
        if (plan) revisionId = await insertRevision(tx, row.id, ws, plan, reuse, now);
        await tx
          .updateTable("deployments")
          .set({
            source_config: JSON.stringify(nextSource),
            source_revision_config: JSON.stringify(merged),
            ...(secretsChanged ? sealSecrets(ctx.box, ws, row.id, secrets) : {}),
            ...(revisionId ? { latest_revision_id: revisionId } : {}),
            ...(proxyConfig !== undefined ? { proxy_config: proxyConfig } : {}),
            updated_at: now,
          })
          .where("id", "=", row.id)
          .execute();
      });
      if (proxyConfig !== undefined) {
        await engine().runtime.updateEgress(row.id, proxyConfig === null ? null : JSON.parse(proxyConfig));
        // The replaced config's sealed values: nothing refers to them any more.
        await releaseProxyConfig(db, ws, row.proxy_config);
      }
      if (revisionId) await queue(row.id, revisionId);
      ctx.log.info(
        {
          deployment: row.id,
          revision: revisionId,
          secretsChanged,
          sourceChanged,
          proxyConfigChanged: proxyConfig !== undefined,
        },
        "deployment updated",
      );
      return c.json(await record((await getDeploymentRow(db, ws, row.id))!));
    },
  });

  async function deleteDeployment(workspaceId: string, id: string): Promise<boolean> {
    const row = await getDeploymentRow(db, workspaceId, id);
    if (!row) return false;
    await db
      .updateTable("deployments")
      .set({ status: "AWAITING_DELETE", updated_at: nowIso() })
      .where("id", "=", id)
      .execute();
    const revisions = await db
      .selectFrom("deployment_revisions")
      .select("id")
      .where("deployment_id", "=", id)
      .execute();
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

  router.add({
    method: "delete",
    path: "/deployments/:deployment_id",
    summary: "Delete a deployment: stops its agent servers and removes its revisions and builds",
    tags: TAGS,
    params: deploymentParams,
    query: z.object({ delete_tracing_project: z.enum(["true", "false"]).optional() }),
    responses: { 204: { description: "Deleted" }, 404: { description: "Not found" } },
    handler: async ({ c, principal, params }) => {
      if (!(await deleteDeployment(principal.workspaceId, params.deployment_id)))
        throw deploymentNotFound(params.deployment_id);
      return c.body(null, 204);
    },
  });

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

  registerEgressLogRoute(router, ctx);

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
