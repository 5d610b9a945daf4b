import fs from "node:fs";
import path from "node:path";
import { socketRoot } from "../confinement/confinement.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import { deleteLabelledSandboxes, DEPLOYMENT_LABEL, deploymentUser, REVISION_LABEL } from "./data-plane-gateway.ts";
import { buildEgressId, serverEgressId } from "../confinement/egress-plan.ts";
import type { RuntimeDeps } from "./runtime-deps.ts";

/** Deletes the sandboxes a revision (or, without one, the whole deployment) created. */
export async function deleteSandboxes(
  rt: RuntimeDeps,
  deployment: { id: string; workspace_id: string; api_key_id: string },
  revisionId: string | null,
  log?: RevisionLog,
): Promise<void> {
  try {
    const userId = await deploymentUser(rt.ctx.db, deployment.api_key_id);
    if (!userId) return;
    const n = await deleteLabelledSandboxes(
      { baseUrl: () => rt.ctx.baseUrl(), box: rt.ctx.box },
      { userId, workspaceId: deployment.workspace_id },
      revisionId ? REVISION_LABEL : DEPLOYMENT_LABEL,
      revisionId ?? deployment.id,
    );
    if (n) log?.line(`deleted ${n} sandbox(es) this revision created`);
  } catch (err) {
    rt.ctx.log.warn(
      { err, deployment: deployment.id, revision: revisionId },
      "could not delete the sandboxes of a deployment (their TTL will)",
    );
  }
}

/** Kills what a dead platform process left of a revision's server (its cgroup). */
export async function killLeftover(rt: RuntimeDeps, revisionId: string): Promise<void> {
  await rt.launcher.killLeftover(`dep-${revisionId}`);
  await rt.launcher.killLeftover(`dep-build-${revisionId}`);
  // Their egress files (a process killed with the platform never removed them).
  for (const id of [serverEgressId(revisionId), buildEgressId(revisionId)])
    fs.rmSync(path.join(rt.layout.root, "egress", id), { recursive: true, force: true });
}

/** Removes a deleted deployment's private state (its database) and npm cache. */
export function removeState(rt: RuntimeDeps, deploymentId: string): void {
  fs.rmSync(rt.layout.stateDir(deploymentId), { recursive: true, force: true });
  fs.rmSync(rt.layout.npmCacheFor(deploymentId), { recursive: true, force: true });
}

export function removeSocket(revisionId: string): void {
  fs.rmSync(path.join(socketRoot(), revisionId), { recursive: true, force: true });
}
