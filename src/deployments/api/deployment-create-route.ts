import { HttpError, invalidAt, conflict } from "../../http/errors.ts";
import { createApiKey } from "../../identity/api-keys.ts";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import { apiKeyAad, sealSecrets } from "../store/deployment-secrets.ts";
import { getDeploymentRow } from "../store/deployment-store.ts";
import {
  checkBuildable,
  checkSourceConfig,
  checkSourceSupported,
  duplicateSecretNames,
  mergeRevisionConfig,
  type RevisionPlan,
} from "../rollout/revision-plan.ts";
import type { z } from "zod";
import type { Principal } from "../../http/principal.ts";
import { createDeploymentBody, deploymentRecord } from "./schemas.ts";
import { releaseProxyConfig, storedProxyConfig } from "./deployment-proxy-config.ts";
import { insertRevision, isUniqueViolation, TAGS, type RouteDeps } from "./route-support.ts";

type CreateBody = z.infer<typeof createDeploymentBody>;

/** POST /deployments: a deployment, and its first revision when there is something to build. */
export function registerCreateRoute(d: RouteDeps): void {
  const { router, ctx, db, record, queue } = d;

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
      const checked = await checkCreate(d, ws, body);
      const id = newId();
      // Last of the checks: it seals the config's opaque values.
      const proxyConfig = (await storedProxyConfig(ctx, ws, body.proxy_config)) ?? null;
      let revisionId: string | null = null;
      try {
        revisionId = await insertDeployment(d, principal, id, body, checked, proxyConfig);
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
}

/** What the checks of a new deployment found: its revision config and whether it has something to build. */
interface CheckedCreate {
  repoUrl: string | null;
  merged: RevisionPlan["sourceRevisionConfig"];
  what: Awaited<ReturnType<typeof checkBuildable>>;
}

/** Every check of a new deployment but its proxy config: 422, 409 or 429 before anything is written. */
async function checkCreate(d: RouteDeps, ws: string, body: CreateBody): Promise<CheckedCreate> {
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
    layout: d.engine().layout,
    requireSource: false,
    ...d.localSource,
  });
  await checkNameAndQuota(d, ws, body.name);
  return { repoUrl, merged, what };
}

async function checkNameAndQuota(d: RouteDeps, ws: string, name: string): Promise<void> {
  const { ctx, db } = d;
  if (
    await db
      .selectFrom("deployments")
      .select("id")
      .where("workspace_id", "=", ws)
      .where("name", "=", name)
      .executeTakeFirst()
  ) {
    throw conflict(`A deployment named ${name} already exists in this workspace`);
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
}

/**
 * Writes the deployment, its API key and (when there is something to build) its first revision in
 * one transaction; the revision's id, to be queued after it.
 */
async function insertDeployment(
  d: RouteDeps,
  principal: Principal,
  id: string,
  body: CreateBody,
  { repoUrl, merged, what }: CheckedCreate,
  proxyConfig: string | null,
): Promise<string | null> {
  const { ctx, db } = d;
  const ws = principal.workspaceId;
  const now = nowIso();
  const sourceConfig = { ...body.source_config, custom_url: null };
  let revisionId: string | null = null;
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
  return revisionId;
}
