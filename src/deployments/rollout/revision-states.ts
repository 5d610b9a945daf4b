import type { Kysely } from "kysely";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import type { Database } from "../../store/schema.ts";
import type { DeploymentRevisionsTable } from "../store/deployments-tables.ts";
import "../store/deployments-tables.ts";

/** Every revision status of the real control plane (`UNKNOWN` is never written by Wharf). */
export const REVISION_STATUSES = [
  "CREATING",
  "QUEUED",
  "AWAITING_BUILD",
  "BUILDING",
  "AWAITING_DEPLOY",
  "DEPLOYING",
  "CREATE_FAILED",
  "BUILD_FAILED",
  "DEPLOY_FAILED",
  "DEPLOYED",
  "SKIPPED",
  "INTERRUPTED",
  "UNKNOWN",
] as const;
export type RevisionStatus = (typeof REVISION_STATUSES)[number];

export const TERMINAL_STATUSES: ReadonlySet<RevisionStatus> = new Set([
  "CREATE_FAILED",
  "BUILD_FAILED",
  "DEPLOY_FAILED",
  "DEPLOYED",
  "SKIPPED",
  "INTERRUPTED",
]);
export const TRANSITIONAL_STATUSES: RevisionStatus[] = [
  "CREATING",
  "QUEUED",
  "AWAITING_BUILD",
  "BUILDING",
  "AWAITING_DEPLOY",
  "DEPLOYING",
];
/** States a revision waits in without an owner, from which a platform process may claim it. */
export const CLAIMABLE_STATUSES: RevisionStatus[] = ["QUEUED", "AWAITING_BUILD", "AWAITING_DEPLOY"];

/**
 * The legal moves. Going back from BUILDING to AWAITING_BUILD (and DEPLOYING to AWAITING_DEPLOY) is
 * the explicit resume after the process that ran the phase died; everything else only moves forward.
 */
const TRANSITIONS: Record<RevisionStatus, RevisionStatus[]> = {
  CREATING: ["QUEUED", "CREATE_FAILED", "SKIPPED", "INTERRUPTED"],
  QUEUED: ["AWAITING_BUILD", "SKIPPED", "INTERRUPTED"],
  AWAITING_BUILD: ["BUILDING", "AWAITING_DEPLOY", "BUILD_FAILED", "SKIPPED", "INTERRUPTED"],
  BUILDING: ["AWAITING_DEPLOY", "BUILD_FAILED", "INTERRUPTED", "AWAITING_BUILD"],
  AWAITING_DEPLOY: ["DEPLOYING", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED"],
  DEPLOYING: ["DEPLOYED", "DEPLOY_FAILED", "INTERRUPTED", "AWAITING_DEPLOY"],
  CREATE_FAILED: [],
  BUILD_FAILED: [],
  DEPLOY_FAILED: [],
  DEPLOYED: [],
  SKIPPED: [],
  INTERRUPTED: [],
  UNKNOWN: [],
};

export function canTransition(from: RevisionStatus, to: RevisionStatus): boolean {
  return TRANSITIONS[from]?.includes(to) ?? false;
}

/** The revision moved under us: another process claimed it, a user interrupted it, or it was deleted. */
export class LostRevision extends Error {}

export interface TransitionOptions {
  /** Only if the revision is still owned by this process (null: only if unowned). Omit to ignore the owner. */
  owner?: string | null;
  reason?: string;
  /** Other columns written in the same statement (owner, deadlines, artifacts, …). */
  set?: Partial<Omit<DeploymentRevisionsTable, "id" | "status">>;
}

/**
 * Moves a revision from one of `from` to `to` with one conditional UPDATE (`WHERE status IN from`),
 * so that two processes on one database can never both make the same move, and records the move
 * with its timestamp. Throws LostRevision when the row was not in an expected state.
 */
export async function transition(
  db: Kysely<Database>,
  revisionId: string,
  from: RevisionStatus[],
  to: RevisionStatus,
  options: TransitionOptions = {},
): Promise<void> {
  for (const f of from) if (!canTransition(f, to)) throw new Error(`illegal revision transition ${f} -> ${to}`);
  const now = nowIso();
  await db.transaction().execute(async (tx) => {
    const before = await tx
      .selectFrom("deployment_revisions")
      .select(["status"])
      .where("id", "=", revisionId)
      .executeTakeFirst();
    let q = tx
      .updateTable("deployment_revisions")
      .set({
        ...options.set,
        status: to,
        updated_at: now,
        ...(to === "DEPLOYED" || TERMINAL_STATUSES.has(to) ? { phase_deadline: null } : {}),
      })
      .where("id", "=", revisionId)
      .where("status", "in", from);
    if (options.owner !== undefined)
      q = options.owner === null ? q.where("owner", "is", null) : q.where("owner", "=", options.owner);
    const res = await q.executeTakeFirst();
    if (Number(res.numUpdatedRows) !== 1)
      throw new LostRevision(
        `revision ${revisionId} is no longer in ${from.join("/")} (now ${before?.status ?? "deleted"})`,
      );
    await tx
      .insertInto("deployment_revision_transitions")
      .values({
        id: newId(),
        revision_id: revisionId,
        from_status: before?.status ?? null,
        to_status: to,
        reason: options.reason ?? null,
        at: now,
      })
      .execute();
  });
}

/** Records the first state of a new revision (inside the caller's transaction). */
export async function recordCreated(
  db: Kysely<Database>,
  revisionId: string,
  status: RevisionStatus,
  at: string,
): Promise<void> {
  await db
    .insertInto("deployment_revision_transitions")
    .values({ id: newId(), revision_id: revisionId, from_status: null, to_status: status, reason: "created", at })
    .execute();
}
