import path from "node:path";
import { nowIso } from "../../store/database.ts";
import type { Database } from "../../store/schema.ts";
import { openSecrets } from "../store/deployment-secrets.ts";
import { RevisionLog } from "../store/revision-logs.ts";
import { buildOrReuse } from "./build-phase.ts";
import { deployPhase } from "./deploy-phase.ts";
import { leaseUntil, type EngineState, type Revision } from "./engine-state.ts";
import type { AbortReason } from "./phase-end.ts";
import { hasCustomAuth } from "./project-flags.ts";
import { LostRevision, transition, type RevisionStatus } from "./revision-states.ts";

/** What a deploy needs of the revision's build. */
interface BuiltProject {
  artifactDir: string | null;
  projectDir: string | null;
  configFile: string | null;
  graphs: string[];
  hasCustomAuth: boolean;
}

/** One rollout: claims a waiting revision, builds it (or reuses a build), then deploys it. */
export async function rollout(
  s: EngineState,
  rev: Revision,
  entry: { controller: AbortController; reason: AbortReason | null },
): Promise<void> {
  const deployment = await claim(s, rev);
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
    let project: BuiltProject = {
      artifactDir: rev.artifact_dir,
      projectDir: rev.project_dir,
      configFile: null,
      graphs: rev.graphs ? (JSON.parse(rev.graphs) as string[]) : [],
      hasCustomAuth: false,
    };
    if (status === "AWAITING_BUILD") {
      const env = Object.fromEntries(secrets.map((sec) => [sec.name, sec.value]));
      const built = await buildOrReuse(s, rev, deployment, entry, buildLog, env);
      if (!built) return;
      project = { ...project, ...built };
    }
    await buildLog.flush();
    await deployPhase(s, rev, deployment, entry, deployLog, secrets, deployable(s, rev, project));
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

/** Claims a waiting revision for this process; its deployment, or null when another process was first. */
async function claim(s: EngineState, rev: Revision): Promise<Database["deployments"] | null> {
  const claimed = await s.db
    .updateTable("deployment_revisions")
    .set({ owner: s.nodeId, lease_until: leaseUntil(s), updated_at: nowIso() })
    .where("id", "=", rev.id)
    .where("status", "=", rev.status)
    .where("owner", "is", null)
    .executeTakeFirst();
  if (Number(claimed.numUpdatedRows) !== 1) return null;
  const deployment = await s.db
    .selectFrom("deployments")
    .selectAll()
    .where("id", "=", rev.deployment_id)
    .executeTakeFirst();
  return deployment ?? null;
}

/** The built project with its langgraph.json found and its custom auth read, ready to deploy. */
function deployable(s: EngineState, rev: Revision, project: BuiltProject) {
  const configPath = JSON.parse(rev.source_revision_config).langgraph_config_path as string;
  project.configFile ??= path.join(rev.artifact_dir ?? s.layout.buildDir(rev.id), configPath);
  if (project.projectDir)
    project.hasCustomAuth = hasCustomAuth(path.join(project.projectDir, path.basename(configPath)));
  return project as BuiltProject & { projectDir: string; configFile: string };
}
