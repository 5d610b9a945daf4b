import type { Kysely } from "kysely";
import type { Logger } from "../../log/logger.ts";
import { nowIso } from "../../store/database.ts";
import type { Database } from "../../store/schema.ts";
import { buildStillThere } from "../build/builder.ts";
import { killOrphan } from "../runtime/agent-process.ts";
import type { RevisionRuntime } from "../runtime/revision-runtime.ts";
import type { DeploymentRevisionsTable } from "../store/deployments-tables.ts";
import { RevisionLog } from "../store/revision-logs.ts";
import { lapsedOrGone } from "./owner-watch.ts";
import { LostRevision, transition, type RevisionStatus } from "./revision-states.ts";

/**
 * Taking over the work of a platform process that is gone: this node's own leftovers at start,
 * and revisions and rollout locks whose lease ran out on the way. In-flight revisions are put
 * back in line for their phase (or INTERRUPTED after MAX_ATTEMPTS); the loop picks them up again.
 */

/** How many times a revision is resumed after the platform died under it before it is INTERRUPTED. */
export const MAX_ATTEMPTS = 3;

export interface TakeoverDeps {
  db: Kysely<Database>;
  nodeId: string;
  runtime: Pick<RevisionRuntime, "killLeftover">;
  log: Logger;
  /** Other processes seen gone although their leases hold (see `OwnerWatch`). */
  gone: readonly string[];
}

/**
 * At start: whatever this node owned belongs to a process that is gone (the previous run of this
 * platform). Its in-flight revisions are resumed (or INTERRUPTED after too many attempts), its
 * rollout locks released, and its DEPLOYED revisions are served again by the supervisor.
 */
export async function reconcileOwnWork(d: TakeoverDeps): Promise<void> {
  const mine = await d.db.selectFrom("deployment_revisions").selectAll().where("owner", "=", d.nodeId).execute();
  for (const rev of mine) {
    await d.runtime.killLeftover(rev.id);
    if (rev.status === "DEPLOYED") {
      if (rev.pid && killOrphan(rev.pid, rev.deployment_id))
        d.log.warn({ revision: rev.id, pid: rev.pid }, "killed an agent server left by the previous platform process");
      await d.db
        .updateTable("deployment_revisions")
        .set({ pid: null, serving_url: null, lease_until: null })
        .where("id", "=", rev.id)
        // Another process may have taken it over meanwhile: its claim stands.
        .where("owner", "=", d.nodeId)
        .execute();
    } else if (["AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING"].includes(rev.status)) {
      if (rev.pid) killOrphan(rev.pid, rev.deployment_id);
      await resume(d, rev, `the platform process working on it stopped during ${rev.status}`);
    }
  }
  await d.db
    .updateTable("deployments")
    .set({ rollout_revision_id: null, rollout_owner: null, rollout_lease_until: null })
    .where("rollout_owner", "=", d.nodeId)
    .execute();
}

/** Revisions and rollout locks of processes whose lease ran out, or that are gone: resume them here. */
export async function sweepAbandoned(d: TakeoverDeps, runningHere: (revisionId: string) => boolean): Promise<void> {
  const now = nowIso();
  const stale = await d.db
    .selectFrom("deployment_revisions")
    .selectAll()
    .where("status", "in", ["AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING"])
    .where("owner", "is not", null)
    .where(lapsedOrGone("owner", "lease_until", now, d.gone))
    .execute();
  for (const rev of stale)
    if (!runningHere(rev.id)) await resume(d, rev, `${abandonedBy(rev.owner!, d.gone)} during ${rev.status}`);
  // A revision left in CREATING (the process died between the insert and the queueing).
  const creating = await d.db
    .selectFrom("deployment_revisions")
    .select(["id"])
    .where("status", "=", "CREATING")
    .where("created_at", "<", new Date(Date.now() - 10_000).toISOString())
    .execute();
  for (const r of creating) {
    await transition(d.db, r.id, ["CREATING"], "QUEUED", { reason: "queued after a platform restart" }).catch((err) => {
      // Lost: another process queued it first, or it was deleted. Anything else is retried next tick.
      if (!(err instanceof LostRevision))
        d.log.warn({ err, revision: r.id }, "could not queue a revision left in CREATING");
    });
  }
  await d.db
    .updateTable("deployments")
    .set({ rollout_revision_id: null, rollout_owner: null, rollout_lease_until: null })
    .where("rollout_owner", "is not", null)
    .where(lapsedOrGone("rollout_owner", "rollout_lease_until", now, d.gone))
    .execute();
}

/** Why another process's work is taken over, for its log. */
export function abandonedBy(owner: string, gone: readonly string[]): string {
  return gone.includes(owner)
    ? `the platform process ${owner} is gone (its database session ended)`
    : `the platform process ${owner} stopped renewing its lease`;
}

/** Puts an abandoned in-flight revision back in line for its phase, or ends it INTERRUPTED. */
async function resume(d: TakeoverDeps, rev: DeploymentRevisionsTable, why: string): Promise<void> {
  const owner = rev.owner;
  const base = { owner: null, lease_until: null, pid: null, serving_url: null, phase_deadline: null };
  try {
    if (rev.attempt >= MAX_ATTEMPTS) {
      await transition(d.db, rev.id, [rev.status as RevisionStatus], "INTERRUPTED", {
        owner,
        reason: `${why}; gave up after ${rev.attempt} attempts`,
        set: { ...base, status_message: `Interrupted: ${why} (${rev.attempt} attempts)` },
      });
      await releaseLock(d.db, rev.deployment_id, rev.id, owner);
      return;
    }
    const building = rev.status === "AWAITING_BUILD" || rev.status === "BUILDING";
    if (!building && !buildStillThere(rev.project_dir)) {
      await transition(d.db, rev.id, [rev.status as RevisionStatus], "INTERRUPTED", {
        owner,
        reason: `${why}; its build is gone`,
        set: { ...base, status_message: `Interrupted: ${why}; its build is gone` },
      });
      await releaseLock(d.db, rev.deployment_id, rev.id, owner);
      return;
    }
    const to: RevisionStatus = building ? "AWAITING_BUILD" : "AWAITING_DEPLOY";
    const reason = `${why}; resuming (attempt ${rev.attempt + 1})`;
    if (rev.status === to) {
      await d.db
        .updateTable("deployment_revisions")
        .set({ ...base, attempt: rev.attempt + 1, updated_at: nowIso() })
        .where("id", "=", rev.id)
        .where("owner", "=", owner!)
        .execute();
    } else {
      await transition(d.db, rev.id, [rev.status as RevisionStatus], to, {
        owner,
        reason,
        set: { ...base, attempt: rev.attempt + 1 },
      });
    }
    await releaseLock(d.db, rev.deployment_id, rev.id, owner);
    const log = new RevisionLog(d.db, rev.id, building ? "build" : "deploy");
    log.line(reason, "warning");
    await log.flush();
    d.log.warn({ revision: rev.id, deployment: rev.deployment_id }, reason);
  } catch (err) {
    if (!(err instanceof LostRevision)) throw err;
  }
}

/** Frees a deployment's rollout lock held for this revision (by this owner, when one is named). */
export async function releaseLock(
  db: Kysely<Database>,
  deploymentId: string,
  revisionId: string,
  owner: string | null,
): Promise<void> {
  let q = db
    .updateTable("deployments")
    .set({ rollout_revision_id: null, rollout_owner: null, rollout_lease_until: null })
    .where("id", "=", deploymentId)
    .where("rollout_revision_id", "=", revisionId);
  if (owner) q = q.where("rollout_owner", "=", owner);
  await q.execute();
}
