import type { SourceConfig, SourceRevisionConfig } from "../api/schemas.ts";
import type { DeploymentsTable } from "../store/deployments-tables.ts";
import { mergeRevisionConfig, type RevisionPlan } from "./revision-plan.ts";

/** The fields of a PATCH that bear on whether it makes a revision. */
export interface DeploymentPatch {
  revision_source?: string | null;
  source_config?: SourceConfig | null;
  source_revision_config?: SourceRevisionConfig | null;
}

export interface PatchPlan {
  /** The deployment's `source_config` after the PATCH. */
  nextSource: Record<string, unknown>;
  /** Its `source_revision_config` after the PATCH. */
  merged: Record<string, string | null>;
  /** A revision field (ref, config path, tarball, local path…) was named. */
  sourceChanged: boolean;
  /** The install or build command changed. */
  commandsChanged: boolean;
  /** Does this PATCH make a revision? (then `checkBuildable` decides whether it builds). */
  newRevision: boolean;
  /** What that revision is built from. */
  revision: RevisionPlan;
  /**
   * Only the secrets or resources changed: the revision deploys the current build again
   * (the active revision's, else the latest's) instead of building.
   */
  reuseBuildOf: string | null;
}

/**
 * "Does this PATCH make a revision, and from what?", decided from the stored deployment and the
 * body alone (the secrets' merge, which needs the sealed values, is done before and says only
 * whether they changed). Pure: the route validates, checks buildability and writes.
 */
export function planPatch(
  row: Pick<
    DeploymentsTable,
    "source" | "source_config" | "source_revision_config" | "active_revision_id" | "latest_revision_id"
  >,
  body: DeploymentPatch,
  secretsChanged: boolean,
): PatchPlan {
  const currentSource = JSON.parse(row.source_config) as Record<string, unknown>;
  const nextSource = { ...currentSource };
  let commandsChanged = false;
  for (const [k, v] of Object.entries(body.source_config ?? {})) {
    // custom_url is read-only (checked before); undefined means "not in the body".
    if (v === undefined || k === "custom_url") continue;
    if ((k === "install_command" || k === "build_command") && (v ?? null) !== (currentSource[k] ?? null))
      commandsChanged = true;
    // null keeps a field, except the commands, where null clears them.
    if (v !== null || k === "install_command" || k === "build_command") nextSource[k] = v;
  }
  const resourceSpecChanged = body.source_config?.resource_spec != null;
  const { merged, changed: sourceChanged } = mergeRevisionConfig(
    JSON.parse(row.source_revision_config),
    body.source_revision_config,
  );
  const newRevision =
    sourceChanged ||
    commandsChanged ||
    secretsChanged ||
    resourceSpecChanged ||
    (body.revision_source != null && body.revision_source !== row.source);
  const revision: RevisionPlan = {
    source: body.revision_source ?? row.source,
    sourceRevisionConfig: merged,
    buildConfig: {
      repo_url: (nextSource.repo_url as string | null) ?? null,
      install_command: (nextSource.install_command as string | null) ?? null,
      build_command: (nextSource.build_command as string | null) ?? null,
    },
  };
  const reuseBuildOf =
    newRevision && !sourceChanged && !commandsChanged ? (row.active_revision_id ?? row.latest_revision_id) : null;
  return { nextSource, merged, sourceChanged, commandsChanged, newRevision, revision, reuseBuildOf };
}
