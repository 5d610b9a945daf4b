import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import type { Database } from "../../store/schema.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import { leaseUntil, phaseDeps, type EngineState, type Revision } from "./engine-state.ts";
import { checkReady, waitUntilUp } from "./health.ts";
import type { LiveRevision } from "./live-revision.ts";
import { endFailedPhase, phaseSignal, type AbortReason } from "./phase-end.ts";
import { smokeInputOf } from "./project-flags.ts";
import { LostRevision, transition } from "./revision-states.ts";
import { ROUTE_TTL_MS } from "./route-cache.ts";
import { startProcess } from "./start-server.ts";

/**
 * The deploy phase of a rollout and the switch: the built revision's server started and checked,
 * the stable URL switched to it, and the replaced revision stopped once drained.
 */

export async function deployPhase(
  s: EngineState,
  rev: Revision,
  deployment: Database["deployments"],
  entry: { controller: AbortController; reason: AbortReason | null },
  log: RevisionLog,
  secrets: Array<{ name: string; value: string }>,
  project: {
    artifactDir: string | null;
    projectDir: string;
    configFile: string;
    graphs: string[];
    hasCustomAuth: boolean;
  },
): Promise<void> {
  const me = s.nodeId;
  const deadline = new Date(Date.now() + s.opts.deployTimeoutMs).toISOString();
  await transition(s.db, rev.id, ["AWAITING_DEPLOY"], "DEPLOYING", {
    owner: me,
    reason: "deploy started",
    set: { phase_deadline: deadline },
  });
  const phase = phaseSignal(entry, s.opts.deployTimeoutMs);
  let live: LiveRevision | null = null;
  try {
    live = await startProcess(
      s,
      deployment,
      rev.id,
      { ...project, artifactDir: project.artifactDir ?? s.layout.buildDir(rev.id) },
      secrets,
      log,
      phase.signal,
    );
    await s.db
      .updateTable("deployment_revisions")
      .set({ pid: live.proc.pid ?? null })
      .where("id", "=", rev.id)
      .execute();
    await waitUntilUp(live.proc, phase.signal, log);
    live.here.up();
    await checkReady(live.proc, project.graphs, {
      workspaceId: deployment.workspace_id,
      hasCustomAuth: project.hasCustomAuth,
      signal: phase.signal,
      log,
      timeoutMs: Math.min(60_000, s.opts.deployTimeoutMs),
      smokeInput: smokeInputOf(deployment),
    });
    phase.clear();
    await switchTo(s, rev, live);
    live = null;
  } catch (err) {
    if (err instanceof LostRevision) throw err;
    const exited = live && !live.proc.running;
    live?.here.up();
    await live?.proc.stop(2000);
    if (exited) log.line(`the agent server exited with code ${await live!.proc.exited}`, "error");
    await endFailedPhase(
      phaseDeps(s),
      rev,
      "DEPLOYING",
      "DEPLOY_FAILED",
      entry.reason,
      err as Error,
      log,
      s.opts.deployTimeoutMs,
    );
  } finally {
    phase.clear();
    if (live) await live.proc.stop(2000);
  }
}

/**
 * Makes a healthy revision the live one: revision DEPLOYED and the deployment's active revision
 * in one transaction, the route switched at once, and the replaced revision stopped once the
 * requests it is serving have finished.
 */
async function switchTo(s: EngineState, rev: Revision, live: LiveRevision): Promise<void> {
  const me = s.nodeId;
  const now = nowIso();
  let previous: string | null = null;
  await s.db.transaction().execute(async (tx) => {
    const dep = await tx
      .selectFrom("deployments")
      .select(["active_revision_id"])
      .where("id", "=", rev.deployment_id)
      .executeTakeFirst();
    if (!dep) throw new LostRevision("the deployment was deleted");
    previous = dep.active_revision_id;
    const res = await tx
      .updateTable("deployment_revisions")
      .set({
        status: "DEPLOYED",
        updated_at: now,
        phase_deadline: null,
        serving_url: live.url,
        pid: live.proc.pid ?? null,
        lease_until: leaseUntil(s),
        status_message: null,
      })
      .where("id", "=", rev.id)
      .where("status", "=", "DEPLOYING")
      .where("owner", "=", me)
      .executeTakeFirst();
    if (Number(res.numUpdatedRows) !== 1) throw new LostRevision(`revision ${rev.id} is no longer DEPLOYING`);
    await tx
      .insertInto("deployment_revision_transitions")
      .values({
        id: newId(),
        revision_id: rev.id,
        from_status: "DEPLOYING",
        to_status: "DEPLOYED",
        reason: "healthy; now serving",
        at: now,
      })
      .execute();
    await tx
      .updateTable("deployments")
      .set({ active_revision_id: rev.id, updated_at: now })
      .where("id", "=", rev.deployment_id)
      .execute();
  });
  live.markReady();
  s.live.set(rev.id, live);
  s.routes.invalidate(rev.deployment_id);
  live.log.line(`DEPLOYED: serving the deployment's URL${previous ? ` (replacing revision ${previous})` : ""}`);
  if (previous && previous !== rev.id) retire(s, previous, `replaced by revision ${rev.id}`);
}

/** Stops a replaced revision after its in-flight requests finish (and caches elsewhere expire). */
export function retire(s: EngineState, revisionId: string, why: string): void {
  const old = s.live.get(revisionId);
  if (!old || old.draining) return;
  old.draining = true;
  const task = (async () => {
    const started = Date.now();
    await new Promise((r) => setTimeout(r, ROUTE_TTL_MS));
    const drained = await old.drained(Math.max(0, s.opts.drainTimeoutMs - (Date.now() - started)));
    old.log.line(
      drained
        ? `${why}: drained, stopping`
        : `${why}: ${old.inflight} request(s) still running after the drain timeout, stopping anyway`,
      drained ? "info" : "warning",
    );
    await old.proc.stop(5000);
    s.runtime.removeSocket(revisionId);
    const dep = await s.db
      .selectFrom("deployments")
      .select(["id", "workspace_id", "api_key_id"])
      .where("id", "=", old.deploymentId)
      .executeTakeFirst();
    if (dep) await s.runtime.deleteSandboxes(dep, revisionId, old.log);
    if (s.live.get(revisionId) === old) s.live.delete(revisionId);
    await old.log.flush();
    await s.db
      .updateTable("deployment_revisions")
      .set({ pid: null, serving_url: null, owner: null, lease_until: null })
      .where("id", "=", revisionId)
      .where("owner", "=", s.nodeId)
      .execute();
  })();
  s.track(task);
}
