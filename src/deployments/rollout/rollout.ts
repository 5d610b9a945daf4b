import path from "node:path";
import { nowIso } from "../../store/database.ts";
import { openSecrets } from "../store/deployment-secrets.ts";
import { RevisionLog } from "../store/revision-logs.ts";
import { buildPhase, reusableBuild } from "./build-phase.ts";
import { deployPhase } from "./deploy-phase.ts";
import { leaseUntil, type EngineState, type Revision } from "./engine-state.ts";
import type { AbortReason } from "./phase-end.ts";
import { hasCustomAuth } from "./project-flags.ts";
import { LostRevision, transition, type RevisionStatus } from "./revision-states.ts";

/** One rollout: claims a waiting revision, builds it (or reuses a build), then deploys it. */
export async function rollout(
  s: EngineState,
  rev: Revision,
  entry: { controller: AbortController; reason: AbortReason | null },
): Promise<void> {
  const claim = await s.db
    .updateTable("deployment_revisions")
    .set({ owner: s.nodeId, lease_until: leaseUntil(s), updated_at: nowIso() })
    .where("id", "=", rev.id)
    .where("status", "=", rev.status)
    .where("owner", "is", null)
    .executeTakeFirst();
  if (Number(claim.numUpdatedRows) !== 1) return;
  const deployment = await s.db
    .selectFrom("deployments")
    .selectAll()
    .where("id", "=", rev.deployment_id)
    .executeTakeFirst();
  if (!deployment) return;
  const secrets = openSecrets(s.ctx.box, deployment);
  const redactions = secrets.map((sec) => sec.value);
  const buildLog = new RevisionLog(s.db, rev.id, "build", redactions);
  const deployLog = new RevisionLog(s.db, rev.id, "deploy", redactions);
  const me = s.nodeId;
  let status = rev.status as RevisionStatus;
  try {
    if (status === "QUEUED") {
      await transition(s.db, rev.id, ["QUEUED"], "AWAITING_BUILD", { owner: me, reason: `claimed by ${me}` });
      status = "AWAITING_BUILD";
    }
    let project = {
      artifactDir: rev.artifact_dir,
      projectDir: rev.project_dir,
      configFile: null as string | null,
      graphs: rev.graphs ? (JSON.parse(rev.graphs) as string[]) : [],
      hasCustomAuth: false,
    };
    if (status === "AWAITING_BUILD") {
      const reused = rev.reuse_build_of ? await reusableBuild(s, rev.reuse_build_of) : null;
      if (reused) {
        buildLog.line(`reusing the build of revision ${rev.reuse_build_of} (no rebuild)`);
        await transition(s.db, rev.id, ["AWAITING_BUILD"], "AWAITING_DEPLOY", {
          owner: me,
          reason: `reusing the build of ${rev.reuse_build_of}`,
          set: {
            artifact_dir: reused.artifact_dir,
            project_dir: reused.project_dir,
            graphs: reused.graphs,
            repo_commit_sha: reused.repo_commit_sha,
          },
        });
        project = {
          ...project,
          artifactDir: reused.artifact_dir,
          projectDir: reused.project_dir,
          graphs: JSON.parse(reused.graphs ?? "[]") as string[],
        };
      } else {
        if (rev.reuse_build_of)
          buildLog.line(`the build of revision ${rev.reuse_build_of} is gone: building again`, "warning");
        const built = await buildPhase(
          s,
          rev,
          deployment,
          entry,
          buildLog,
          Object.fromEntries(secrets.map((sec) => [sec.name, sec.value])),
        );
        if (!built) return;
        project = { ...project, ...built };
      }
      status = "AWAITING_DEPLOY";
    }
    await buildLog.flush();
    const configPath = JSON.parse(rev.source_revision_config).langgraph_config_path as string;
    project.configFile ??= path.join(rev.artifact_dir ?? s.layout.buildDir(rev.id), configPath);
    if (project.projectDir)
      project.hasCustomAuth = hasCustomAuth(path.join(project.projectDir, path.basename(configPath)));
    await deployPhase(
      s,
      rev,
      deployment,
      entry,
      deployLog,
      secrets,
      project as {
        artifactDir: string | null;
        projectDir: string;
        configFile: string;
        graphs: string[];
        hasCustomAuth: boolean;
      },
    );
  } catch (err) {
    if (err instanceof LostRevision) {
      buildLog.line(`stopped working on this revision: ${err.message}`, "warning");
      return;
    }
    throw err;
  } finally {
    await buildLog.flush();
    await deployLog.flush();
  }
}
