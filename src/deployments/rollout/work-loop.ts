import { nowIso } from "../../store/database.ts";
import { leaseUntil, type EngineState, type Revision } from "./engine-state.ts";
import type { AbortReason } from "./phase-end.ts";
import { LostRevision, transition, type RevisionStatus } from "./revision-states.ts";
import { rollout } from "./rollout.ts";
import { lapsedOrGone } from "./owner-watch.ts";
import { releaseLock } from "./takeover.ts";

/**
 * The work loop's claims and leases: this process's leases extended, interrupts noticed, and the
 * newest waiting revision of each deployment claimed under the per-deployment rollout lock.
 */

/** Extends this process's leases and notices interrupts requested through another process. */
export async function heartbeat(s: EngineState): Promise<void> {
  const until = leaseUntil(s);
  const revisionIds = [...s.rollouts.keys(), ...s.live.keys()];
  if (revisionIds.length) {
    await s.db
      .updateTable("deployment_revisions")
      .set({ lease_until: until })
      .where("owner", "=", s.nodeId)
      .where("id", "in", revisionIds)
      .execute();
    const deploymentIds = [...new Set([...s.rollouts.values()].map((r) => r.deploymentId))];
    if (deploymentIds.length) {
      await s.db
        .updateTable("deployments")
        .set({ rollout_lease_until: until })
        .where("rollout_owner", "=", s.nodeId)
        .where("id", "in", deploymentIds)
        .execute();
    }
  }
  if (s.rollouts.size) {
    const cancelled = await s.db
      .selectFrom("deployment_revisions")
      .select("id")
      .where("id", "in", [...s.rollouts.keys()])
      .where("cancel_requested", "=", 1)
      .execute();
    for (const { id } of cancelled) abortRollout(s, id, "cancel");
  }
}

export function abortRollout(s: EngineState, revisionId: string, reason: AbortReason): boolean {
  const r = s.rollouts.get(revisionId);
  if (!r) return false;
  r.reason ??= reason;
  r.controller.abort();
  return true;
}

/** Claims the per-deployment rollout lock for deployments with waiting revisions and runs them. */
export async function startPendingRollouts(s: EngineState): Promise<void> {
  if (s.stopped || !s.owners.mayClaim()) return;
  const waiting = await s.db
    .selectFrom("deployment_revisions")
    .select(["deployment_id"])
    .distinct()
    .where("status", "in", ["QUEUED", "AWAITING_BUILD", "AWAITING_DEPLOY"])
    .where("owner", "is", null)
    .execute();
  for (const { deployment_id } of waiting) {
    if ([...s.rollouts.values()].some((r) => r.deploymentId === deployment_id)) continue;
    const rev = await s.db
      .selectFrom("deployment_revisions")
      .selectAll()
      .where("deployment_id", "=", deployment_id)
      .where("status", "in", ["QUEUED", "AWAITING_BUILD", "AWAITING_DEPLOY"])
      .where("owner", "is", null)
      .orderBy("id", "desc")
      .executeTakeFirst();
    if (!rev) continue;
    const now = nowIso();
    const lock = await s.db
      .updateTable("deployments")
      .set({ rollout_revision_id: rev.id, rollout_owner: s.nodeId, rollout_lease_until: leaseUntil(s) })
      .where("id", "=", deployment_id)
      .where((eb) =>
        eb.or([
          eb("rollout_owner", "is", null),
          lapsedOrGone("rollout_owner", "rollout_lease_until", now, s.owners.gone),
        ]),
      )
      .executeTakeFirst();
    if (Number(lock.numUpdatedRows) !== 1) continue;
    // Only the newest waiting revision runs; older waiting ones were superseded.
    await skipOlderWaiting(s, deployment_id, rev.id);
    runRollout(s, rev);
  }
}

export async function skipOlderWaiting(s: EngineState, deploymentId: string, newestId: string): Promise<void> {
  const older = await s.db
    .selectFrom("deployment_revisions")
    .select(["id", "status"])
    .where("deployment_id", "=", deploymentId)
    .where("id", "<", newestId)
    .where("status", "in", ["CREATING", "QUEUED", "AWAITING_BUILD", "AWAITING_DEPLOY"])
    .where("owner", "is", null)
    .execute();
  for (const o of older) {
    await transition(s.db, o.id, [o.status as RevisionStatus], "SKIPPED", {
      owner: null,
      reason: `superseded by revision ${newestId}`,
      set: { status_message: `Skipped: superseded by revision ${newestId}` },
    }).catch((err) => {
      if (!(err instanceof LostRevision)) throw err;
    });
  }
}

function runRollout(s: EngineState, rev: Revision): void {
  const controller = new AbortController();
  const entry = { controller, reason: null as AbortReason | null, deploymentId: rev.deployment_id };
  s.rollouts.set(rev.id, entry);
  const task = rollout(s, rev, entry)
    .catch((err) => s.ctx.log.error({ err, revision: rev.id }, "rollout failed unexpectedly"))
    .finally(async () => {
      s.rollouts.delete(rev.id);
      await releaseLock(s.db, rev.deployment_id, rev.id, s.nodeId).catch((err) =>
        s.ctx.log.warn({ err, revision: rev.id }, "rollout lock not released (it lapses with its lease)"),
      );
      s.kick();
    });
  s.track(task);
}
