import type { Kysely } from "kysely";
import { z } from "zod";
import { HttpError } from "../../http/errors.ts";
import type { Router } from "../../http/route.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { newId } from "../../store/ids.ts";
import type { Database } from "../../store/schema.ts";
import { getDeploymentRow, latestCommitSha, toDeploymentRecord } from "../store/deployment-store.ts";
import type { DeploymentsTable } from "../store/deployments-tables.ts";
import type { RevisionPlan } from "../rollout/revision-plan.ts";
import { recordCreated, transition } from "../rollout/revision-states.ts";
import type { RolloutEngine } from "../rollout/rollout-engine.ts";
import { idParam } from "./schemas.ts";
import { localSourceRoots } from "../example-deployment.ts";
import { presentStoredProxyConfig } from "./deployment-proxy-config.ts";

/** What the `/v2/deployments` route registrars share. */

export const TAGS = ["deployments"];
export const deploymentParams = z.object({ deployment_id: idParam });
export const revisionParams = z.object({ deployment_id: idParam, revision_id: idParam });
export const deploymentNotFound = (id: string) => new HttpError(404, `Deployment ID ${id} not found.`);
export const revisionNotFound = (id: string) => new HttpError(404, `Revision ID ${id} not found.`);

export function isUniqueViolation(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return e?.code === "23505" || /UNIQUE constraint failed/i.test(e?.message ?? "");
}

/**
 * Inserts a revision in CREATING, points the deployment's `latest_revision_id` at it, and (after
 * the caller's transaction) queues it; waiting older revisions are superseded (SKIPPED).
 */
export async function insertRevision(
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

export interface RouteDeps {
  router: Router;
  ctx: PlatformContext;
  db: Kysely<Database>;
  engine: () => RolloutEngine;
  localSource: { localRoots: string[]; home: string };
  record(row: DeploymentsTable): Promise<Record<string, unknown>>;
  queue(deploymentId: string, revisionId: string): Promise<void>;
  requireDeployment(workspaceId: string, id: string): Promise<DeploymentsTable>;
}

export function routeDeps(router: Router, ctx: PlatformContext, engine: () => RolloutEngine): RouteDeps {
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

  return { router, ctx, db, engine, localSource, record, queue, requireDeployment };
}
