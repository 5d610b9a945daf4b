import path from "node:path";
import { nowIso } from "../../store/database.ts";
import { buildStillThere } from "../build/builder.ts";
import { openSecrets } from "../store/deployment-secrets.ts";
import { RevisionLog } from "../store/revision-logs.ts";
import { retire } from "./deploy-phase.ts";
import { leaseUntil, type EngineState, type Revision } from "./engine-state.ts";
import { waitUntilUp } from "./health.ts";
import type { LiveRevision } from "./live-revision.ts";
import { startProcess } from "./start-server.ts";

/**
 * Keeps the active revision of every deployment served by exactly one process: starts the ones
 * nobody serves (after a restart, or when their server's lease ran out), restarts crashed
 * servers with backoff, and retires local servers that are no longer active.
 */
export async function superviseServing(s: EngineState): Promise<void> {
  if (s.stopped) return;
  const now = nowIso();
  const active = await s.db
    .selectFrom("deployments")
    .innerJoin("deployment_revisions", "deployment_revisions.id", "deployments.active_revision_id")
    .selectAll("deployment_revisions")
    .select(["deployments.workspace_id as dep_workspace_id"])
    .where("deployment_revisions.status", "=", "DEPLOYED")
    .where((eb) =>
      eb.or([
        eb("deployment_revisions.owner", "is", null),
        eb("deployment_revisions.owner", "=", s.nodeId),
        eb("deployment_revisions.lease_until", "is", null),
        eb("deployment_revisions.lease_until", "<", now),
      ]),
    )
    .execute();
  const activeIds = new Set(active.map((r) => r.id));
  for (const rev of active) {
    if (s.rollouts.has(rev.id)) continue; // being switched to right now
    const live = s.live.get(rev.id);
    if (live && live.proc.running) continue;
    if (live && Date.now() < live.nextRestartAt) continue;
    s.track(serveAgain(s, rev, live ?? null));
  }
  for (const [id, live] of s.live) {
    if (live.draining || activeIds.has(id)) continue;
    const still = await s.db
      .selectFrom("deployments")
      .select(["active_revision_id"])
      .where("id", "=", live.deploymentId)
      .executeTakeFirst();
    if (still?.active_revision_id !== id)
      retire(s, id, still ? `revision ${still.active_revision_id} became active` : "the deployment was deleted");
  }
}

/** Starts (or restarts) the server of a DEPLOYED active revision without changing its status. */
async function serveAgain(s: EngineState, rev: Revision, previous: LiveRevision | null): Promise<void> {
  if (s.restarting.has(rev.id)) return;
  s.restarting.add(rev.id);
  try {
    if (!(await claimServing(s, rev))) return;
    const deployment = await s.db
      .selectFrom("deployments")
      .selectAll()
      .where("id", "=", rev.deployment_id)
      .executeTakeFirst();
    if (!deployment || !rev.project_dir || !buildStillThere(rev.project_dir)) {
      s.ctx.log.error({ revision: rev.id }, "the active revision's build is gone; it cannot be served again");
      return;
    }
    const secrets = openSecrets(s.ctx.box, deployment);
    const log =
      previous?.log ??
      new RevisionLog(
        s.db,
        rev.id,
        "deploy",
        secrets.map((sec) => sec.value),
      );
    if (previous) {
      const code = await previous.proc.exited;
      log.line(
        `the agent server exited unexpectedly (code ${code}); restarting (restart ${previous.restarts + 1})`,
        "warning",
      );
    } else {
      log.line("serving again after a platform restart");
    }
    const configPath = JSON.parse(rev.source_revision_config).langgraph_config_path as string;
    const live = await startProcess(
      s,
      deployment,
      rev.id,
      {
        artifactDir: rev.artifact_dir ?? s.layout.buildDir(rev.id),
        projectDir: rev.project_dir,
        configFile: path.join(rev.project_dir, path.basename(configPath)),
      },
      secrets,
      log,
    );
    if (previous) {
      live.restarts = previous.restarts + 1;
      live.nextRestartAt = Date.now() + Math.min(30_000, 500 * 2 ** Math.min(live.restarts, 6));
    }
    s.live.set(rev.id, live);
    await comeUp(s, rev, live, log);
  } finally {
    s.restarting.delete(rev.id);
  }
}

/** Takes over serving a DEPLOYED revision nobody else serves; false when another process does. */
async function claimServing(s: EngineState, rev: Revision): Promise<boolean> {
  const claim = await s.db
    .updateTable("deployment_revisions")
    .set({ owner: s.nodeId, lease_until: leaseUntil(s) })
    .where("id", "=", rev.id)
    .where("status", "=", "DEPLOYED")
    .where((eb) =>
      eb.or([
        eb("owner", "is", null),
        eb("owner", "=", s.nodeId),
        eb("lease_until", "is", null),
        eb("lease_until", "<", nowIso()),
      ]),
    )
    .executeTakeFirst();
  return Number(claim.numUpdatedRows) === 1;
}

/** Waits for a restarted server's `/ok` and routes to it, or stops it (the supervisor tries again later). */
async function comeUp(s: EngineState, rev: Revision, live: LiveRevision, log: RevisionLog): Promise<void> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), s.opts.deployTimeoutMs);
  try {
    await waitUntilUp(live.proc, controller.signal, log);
    live.here.up();
    await s.db
      .updateTable("deployment_revisions")
      .set({ serving_url: live.url, pid: live.proc.pid ?? null })
      .where("id", "=", rev.id)
      .execute();
    live.markReady();
    s.routes.invalidate(rev.deployment_id);
  } catch (err) {
    log.line(`the agent server did not come up: ${(err as Error).message}`, "error");
    live.here.up();
    live.markFailed(err as Error);
    await live.proc.stop(2000);
  } finally {
    clearTimeout(timer);
    await log.flush();
  }
}
