import { invalidAt } from "../../http/errors.ts";
import { nowIso } from "../../store/database.ts";
import { mergeSecrets, openSecrets, sameSecrets, sealSecrets } from "../store/deployment-secrets.ts";
import { getDeploymentRow } from "../store/deployment-store.ts";
import {
  checkBuildable,
  checkSourceConfig,
  checkSourceSupported,
  duplicateSecretNames,
  type RevisionPlan,
} from "../rollout/revision-plan.ts";
import { planPatch } from "../rollout/patch-plan.ts";
import type { z } from "zod";
import type { DeploymentsTable } from "../store/deployments-tables.ts";
import { deploymentRecord, patchDeploymentBody } from "./schemas.ts";

type PatchBody = z.infer<typeof patchDeploymentBody>;
import { releaseProxyConfig, storedProxyConfig } from "./deployment-proxy-config.ts";
import { deploymentParams, insertRevision, TAGS, type RouteDeps } from "./route-support.ts";

/** PATCH /deployments/{id}: a new revision when a revision field, the build commands or the secrets change. */
export function registerPatchRoute(d: RouteDeps): void {
  const { router, ctx, db, engine, localSource, record, queue, requireDeployment } = d;

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
      const { secrets, secretsChanged } = patchedSecrets(d, row, body.secrets);
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
}

/** The deployment's secrets after the PATCH's (a null value keeps one), and whether they changed. */
function patchedSecrets(d: RouteDeps, row: DeploymentsTable, patch: PatchBody["secrets"]) {
  const secrets = openSecrets(d.ctx.box, row);
  if (!patch) return { secrets, secretsChanged: false };
  duplicateSecretNames(patch);
  const m = mergeSecrets(secrets, patch);
  if (m.unknown.length)
    throw invalidAt(
      ["body", "secrets", m.unknown[0], "value"],
      "value may be null only for a secret the deployment already has (null keeps its value)",
    );
  return { secrets: m.secrets, secretsChanged: !sameSecrets(secrets, m.secrets) };
}
