import path from "node:path";
import { nowIso } from "../../store/database.ts";
import { buildStillThere } from "../build/builder.ts";
import { openSecrets } from "../store/deployment-secrets.ts";
import { RevisionLog } from "../store/revision-logs.ts";
import { retire } from "./deploy-phase.ts";
import { leaseUntil, type EngineState, type Revision } from "./engine-state.ts";
import { waitUntilUp } from "./health.ts";
import { ROUTE_TTL_MS } from "./route-cache.ts";
import type { LiveRevision } from "./live-revision.ts";
import { lapsedOrGone } from "./owner-watch.ts";
import { startProcess } from "./start-server.ts";
import { abandonedBy } from "./takeover.ts";

/**
 * Keeps the active revision of every deployment served by exactly one process: starts the ones
 * nobody serves (after a restart, or when their server's lease ran out or its process is gone),
 * restarts crashed servers with backoff, retires local servers that are no longer active, and
 * stops those another process took over (this one was taken for gone, or stalled past its lease).
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
        lapsedOrGone("deployment_revisions.owner", "deployment_revisions.lease_until", now, s.owners.gone),
      ]),
    )
    .execute();
  await yieldTakenOver(s);
  const claiming = s.owners.mayClaim();
  const activeIds = new Set(active.map((r) => r.id));
  for (const rev of active) {
    if (s.rollouts.has(rev.id)) continue; // being switched to right now
    const live = s.live.get(rev.id);
    if (live && live.proc.running) continue;
    if (live && Date.now() < live.nextRestartAt) continue;
    if (rev.owner !== s.nodeId && !claiming) continue;
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
      log.line(
        rev.owner && rev.owner !== s.nodeId
          ? `serving it here: ${abandonedBy(rev.owner, s.owners.gone)}`
          : "serving again after a platform restart",
      );
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
        lapsedOrGone("owner", "lease_until", nowIso(), s.owners.gone),
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

/**
 * Stops the local servers of revisions another process now owns: it took them over while this one
 * was taken for gone (its presence lock's connection dropped) or stalled past its lease. The other
 * process serves them; the stable URL goes there. Only the process is stopped: the revision, its
 * socket folder and its sandboxes are the new owner's.
 */
async function yieldTakenOver(s: EngineState): Promise<void> {
  const mine = [...s.live.values()].filter((l) => !l.draining && !s.rollouts.has(l.revisionId));
  if (mine.length === 0) return;
  const rows = await s.db
    .selectFrom("deployment_revisions")
    .select(["id", "owner"])
    .where(
      "id",
      "in",
      mine.map((l) => l.revisionId),
    )
    .where("owner", "is not", null)
    .where("owner", "!=", s.nodeId)
    .execute();
  for (const row of rows) {
    const live = s.live.get(row.id);
    if (!live || live.draining) continue;
    live.draining = true;
    s.live.delete(row.id);
    s.routes.invalidate(live.deploymentId);
    live.log.line(`the platform process ${row.owner} took this revision over; stopping the server here`, "warning");
    s.ctx.log.warn({ revision: row.id, owner: row.owner }, "another platform process took over a revision served here");
    s.track(
      (async () => {
        await live.drained(ROUTE_TTL_MS);
        await live.proc.stop(3000);
        await live.log.flush();
      })(),
    );
  }
}
