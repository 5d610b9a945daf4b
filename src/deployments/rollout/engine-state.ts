import type { Kysely } from "kysely";
import type { PlatformContext } from "../../platform/context.ts";
import type { Database } from "../../store/schema.ts";
import type { SourcePolicy } from "../build/sources.ts";
import type { DeploymentsLayout } from "../layout.ts";
import type { RevisionRuntime } from "../runtime/revision-runtime.ts";
import type { DeploymentRevisionsTable } from "../store/deployments-tables.ts";
import type { LiveRevision } from "./live-revision.ts";
import type { OwnerWatch } from "./owner-watch.ts";
import type { Resolved } from "./options.ts";
import type { AbortReason, PhaseDeps } from "./phase-end.ts";
import type { RouteCache } from "./route-cache.ts";
import type { LocalServers } from "./sole-server.ts";

export type Revision = DeploymentRevisionsTable;

/** A rollout running in this process (by revision id in `EngineState.rollouts`). */
export interface RolloutEntry {
  controller: AbortController;
  reason: AbortReason | null;
  deploymentId: string;
}

/**
 * What the rollout engine's phases share (the engine owns it; each phase is a module of functions
 * over it): settings, this process's rollouts and servers, and the loop's hooks.
 */
export interface EngineState {
  readonly ctx: PlatformContext;
  readonly db: Kysely<Database>;
  readonly nodeId: string;
  readonly opts: Resolved;
  readonly layout: DeploymentsLayout;
  readonly runtime: RevisionRuntime;
  readonly live: Map<string, LiveRevision>;
  readonly rollouts: Map<string, RolloutEntry>;
  readonly routes: RouteCache;
  /** Agent servers of this process, starting or running: a start decides `--exclusive` by them. */
  readonly servers: LocalServers;
  /** Revisions whose server is being started again right now (see `serveAgain`). */
  readonly restarting: Set<string>;
  /** Which other processes are gone although their leases hold, and whether this one may claim. */
  readonly owners: OwnerWatch;
  stopped: boolean;
  /** What builds may fetch from, once read (see `sourcePolicy`). */
  sources: SourcePolicy | null;
  /** Keeps a background task until it ends (`stop` waits for them). */
  track(p: Promise<unknown>): void;
  /** Runs the work loop soon (coalesced). */
  kick(): void;
}

export function leaseUntil(s: EngineState): string {
  return new Date(Date.now() + s.opts.leaseMs).toISOString();
}

/** What ending a failed phase needs of the engine (see `endFailedPhase`). */
export function phaseDeps(s: EngineState): PhaseDeps {
  return { db: s.db, nodeId: s.nodeId, log: s.ctx.log };
}
