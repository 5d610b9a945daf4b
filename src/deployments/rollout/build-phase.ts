import type { Database } from "../../store/schema.ts";
import { outboundPolicy } from "../../egress/index.ts";
import { buildRevision, buildStillThere } from "../build/builder.ts";
import type { SourcePolicy } from "../build/sources.ts";
import { localSourceRoots } from "../example-deployment.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import { phaseDeps, type EngineState, type Revision } from "./engine-state.ts";
import { endFailedPhase, phaseSignal, type AbortReason } from "./phase-end.ts";
import { LostRevision, transition } from "./revision-states.ts";

/** The build phase of a rollout: a revision's source fetched and built, or an earlier build reused. */

/**
 * The build phase, or none when the revision redeploys a build that is still there: what the
 * revision's build gives its deploy, or null when the build failed (the revision is ended).
 */
export async function buildOrReuse(
  s: EngineState,
  rev: Revision,
  deployment: Database["deployments"],
  entry: { controller: AbortController; reason: AbortReason | null },
  buildLog: RevisionLog,
  env: Record<string, string>,
) {
  const reused = rev.reuse_build_of ? await reuseBuild(s, rev, rev.reuse_build_of, buildLog) : null;
  if (reused) return reused;
  if (rev.reuse_build_of)
    buildLog.line(`the build of revision ${rev.reuse_build_of} is gone: building again`, "warning");
  return buildPhase(s, rev, deployment, entry, buildLog, env);
}

/** Points the revision at an earlier revision's build when that build is still there. */
async function reuseBuild(s: EngineState, rev: Revision, of: string, buildLog: RevisionLog) {
  const reused = await reusableBuild(s, of);
  if (!reused) return null;
  buildLog.line(`reusing the build of revision ${of} (no rebuild)`);
  await transition(s.db, rev.id, ["AWAITING_BUILD"], "AWAITING_DEPLOY", {
    owner: s.nodeId,
    reason: `reusing the build of ${of}`,
    set: {
      artifact_dir: reused.artifact_dir,
      project_dir: reused.project_dir,
      graphs: reused.graphs,
      repo_commit_sha: reused.repo_commit_sha,
    },
  });
  return {
    artifactDir: reused.artifact_dir,
    projectDir: reused.project_dir,
    graphs: JSON.parse(reused.graphs ?? "[]") as string[],
  };
}

async function reusableBuild(s: EngineState, revisionId: string) {
  const r = await s.db
    .selectFrom("deployment_revisions")
    .select(["artifact_dir", "project_dir", "graphs", "repo_commit_sha"])
    .where("id", "=", revisionId)
    .executeTakeFirst();
  return r && r.project_dir && r.graphs && buildStillThere(r.project_dir)
    ? (r as typeof r & { project_dir: string })
    : null;
}

/** What builds may fetch from (operator settings, read once). */
function sourcePolicy(s: EngineState): SourcePolicy {
  const settings = s.ctx.config.settings;
  s.sources ??= {
    localRoots: localSourceRoots(settings),
    maxLocalBytes: settings.WHARF_UPLOAD_LIMIT_BYTES,
    outbound: outboundPolicy(settings),
  };
  return s.sources;
}

async function buildPhase(
  s: EngineState,
  rev: Revision,
  deployment: Database["deployments"],
  entry: { controller: AbortController; reason: AbortReason | null },
  log: RevisionLog,
  env: Record<string, string>,
) {
  const me = s.nodeId;
  const deadline = new Date(Date.now() + s.opts.buildTimeoutMs).toISOString();
  await transition(s.db, rev.id, ["AWAITING_BUILD"], "BUILDING", {
    owner: me,
    reason: "build started",
    set: { phase_deadline: deadline },
  });
  const phase = phaseSignal(entry, s.opts.buildTimeoutMs);
  const src = JSON.parse(rev.source_revision_config) as Record<string, string | null>;
  const bc = JSON.parse(rev.build_config) as Record<string, string | null>;
  try {
    const ident = await s.runtime.identity(deployment);
    const out = await buildRevision(
      {
        revisionId: rev.id,
        source: {
          source_tarball_path: src.source_tarball_path,
          local_path: src.local_path,
          repo_url: bc.repo_url,
          repo_ref: src.repo_ref,
        },
        langgraphConfigPath: src.langgraph_config_path!,
        installCommand: bc.install_command ?? null,
        buildCommand: bc.build_command ?? null,
        env,
      },
      {
        layout: s.layout,
        log,
        signal: phase.signal,
        home: s.ctx.config.home,
        sources: sourcePolicy(s),
        workspaceId: deployment.workspace_id,
        step: s.runtime.buildStep(deployment, rev.id, ident, log, phase.signal),
        afterFetch: (dir) => s.runtime.adoptBuild(dir, ident.uid),
      },
    );
    await transition(s.db, rev.id, ["BUILDING"], "AWAITING_DEPLOY", {
      owner: me,
      reason: "build succeeded",
      set: {
        artifact_dir: out.artifactDir,
        project_dir: out.projectDir,
        graphs: JSON.stringify(out.graphs),
        repo_commit_sha: out.commitSha,
      },
    });
    return {
      artifactDir: out.artifactDir,
      projectDir: out.projectDir,
      configFile: out.configFile,
      graphs: out.graphs,
      hasCustomAuth: out.hasCustomAuth,
    };
  } catch (err) {
    if (err instanceof LostRevision) throw err;
    await endFailedPhase(
      phaseDeps(s),
      rev,
      "BUILDING",
      "BUILD_FAILED",
      entry.reason,
      err as Error,
      log,
      s.opts.buildTimeoutMs,
    );
    return null;
  } finally {
    phase.clear();
  }
}
