import { invalidAt, ValidationFailed, type ValidationIssue } from "../../http/errors.ts";
import type { DeploymentsLayout } from "../layout.ts";
import { configPathProblem } from "../build/project-config.ts";
import { BUILDABLE_SOURCES, type SourceConfig, type SourceRevisionConfig } from "../api/schemas.ts";
import { uploadExists } from "../api/upload-urls.ts";
import { LocalPathRefused, resolveLocalPath } from "../build/local-roots.ts";
import { REPO_URL_RULE, repoUrlProblem } from "../build/repo-url.ts";

/** What a new revision is built from. */
export interface RevisionPlan {
  source: string;
  sourceRevisionConfig: Record<string, string | null>;
  buildConfig: { repo_url: string | null; install_command: string | null; build_command: string | null };
}

const REVISION_KEYS = ["repo_ref", "langgraph_config_path", "image_uri", "source_tarball_path", "local_path"] as const;

/** A source this machine cannot run is refused before anything is created. */
export function checkSourceSupported(source: string, loc: Array<string | number>): void {
  if (!BUILDABLE_SOURCES.has(source)) {
    throw invalidAt(
      loc,
      `Source '${source}' needs a container driver, which this Wharf installation does not have. Use 'internal_source' (an uploaded tarball or a local directory) or 'github' (any git URL with repo_ref).`,
      "source_not_supported",
    );
  }
}

/** Checks of source_config that zod cannot express: read-only and immutable fields. */
export function checkSourceConfig(cfg: SourceConfig | null | undefined, current: Record<string, unknown> | null): void {
  if (!cfg) return;
  const issues: ValidationIssue[] = [];
  if (cfg.custom_url != null && cfg.custom_url !== current?.custom_url) {
    issues.push({
      loc: ["body", "source_config", "custom_url"],
      msg: "custom_url is read-only for buildable sources: it is the deployment's stable URL on this platform",
      type: "value_error",
    });
  }
  if (current) {
    for (const k of ["deployment_type", "repo_url", "integration_id", "listener_id"] as const) {
      if (cfg[k] != null && cfg[k] !== (current[k] ?? null))
        issues.push({
          loc: ["body", "source_config", k],
          msg: `${k} cannot be changed after creation`,
          type: "value_error",
        });
    }
  }
  if (cfg.listener_id != null || cfg.listener_config != null)
    issues.push({
      loc: ["body", "source_config", "listener_id"],
      msg: "listeners are for external_docker sources, which this platform does not run",
      type: "value_error",
    });
  if (issues.length) throw new ValidationFailed(issues);
}

/** Merges a PATCH's non-null revision fields into the current ones (null means "unchanged"). */
export function mergeRevisionConfig(
  current: Record<string, string | null>,
  patch: SourceRevisionConfig | null | undefined,
): { merged: Record<string, string | null>; changed: boolean } {
  const merged: Record<string, string | null> = { ...current };
  let changed = false;
  if (!patch) return { merged, changed };
  for (const k of REVISION_KEYS) {
    const v = patch[k];
    if (v == null) continue;
    changed = true;
    merged[k] = v;
  }
  // A tarball and a local directory are alternatives: naming one replaces the other.
  if (patch.source_tarball_path != null) merged.local_path = null;
  if (patch.local_path != null) merged.source_tarball_path = null;
  return { merged, changed };
}

/**
 * Whether a revision config can be built, as 422s located in the request body. `requireSource`:
 * false for a create that only registers the deployment (the real CLI creates first and uploads
 * its tarball afterwards), in which case no revision is made.
 */
export async function checkBuildable(
  rc: Record<string, string | null>,
  repoUrl: string | null,
  ctx: { workspaceId: string; layout: DeploymentsLayout; requireSource: boolean; localRoots: string[]; home: string },
): Promise<"build" | "nothing"> {
  const at = (k: string) => ["body", "source_revision_config", k];
  const issues: ValidationIssue[] = [];
  if (rc.image_uri)
    issues.push({ loc: at("image_uri"), msg: "image_uri must be null for buildable sources", type: "value_error" });
  if (repoUrl && !rc.source_tarball_path && !rc.local_path && repoUrlProblem(repoUrl))
    issues.push({ loc: ["body", "source_config", "repo_url"], msg: REPO_URL_RULE, type: "value_error" });
  if (rc.source_tarball_path && rc.local_path)
    issues.push({
      loc: at("local_path"),
      msg: "give either source_tarball_path or local_path, not both",
      type: "value_error",
    });
  const hasSource = !!(rc.source_tarball_path || rc.local_path || repoUrl);
  if (!hasSource) {
    if (ctx.requireSource)
      issues.push({
        loc: at("source_tarball_path"),
        msg: "nothing to build: upload a tarball (source_tarball_path from upload-url), or set source_config.repo_url",
        type: "missing",
      });
    if (issues.length) throw new ValidationFailed(issues);
    return "nothing";
  }
  if (!rc.langgraph_config_path)
    issues.push({
      loc: at("langgraph_config_path"),
      msg: "Field required for buildable sources (for example langgraph.json)",
      type: "missing",
    });
  else {
    const problem = configPathProblem(rc.langgraph_config_path);
    if (problem) issues.push({ loc: at("langgraph_config_path"), msg: problem, type: "value_error" });
  }
  if (rc.source_tarball_path && !uploadExists(ctx.layout, ctx.workspaceId, rc.source_tarball_path)) {
    issues.push({
      loc: at("source_tarball_path"),
      msg: "no uploaded tarball at this path: request one with POST /v2/deployments/upload-url and PUT the tarball to its upload_url",
      type: "value_error",
    });
  }
  if (rc.local_path) {
    try {
      await resolveLocalPath(rc.local_path, ctx.localRoots, ctx.home);
    } catch (err) {
      if (!(err instanceof LocalPathRefused)) throw err;
      issues.push({ loc: at("local_path"), msg: err.message, type: "value_error" });
    }
  }
  if (issues.length) throw new ValidationFailed(issues);
  return "build";
}

export function duplicateSecretNames(secrets: Array<{ name: string }>): void {
  const seen = new Map<string, number>();
  secrets.forEach((s, i) => {
    if (seen.has(s.name))
      throw invalidAt(
        ["body", "secrets", i, "name"],
        `Value error, duplicate secret name ${s.name} (also at index ${seen.get(s.name)})`,
      );
    seen.set(s.name, i);
  });
}
