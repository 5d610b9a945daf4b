import fs from "node:fs";
import path from "node:path";
import { resolveOptions, type DeploymentsOptions } from "./options.ts";
import { readNodeId } from "./node-id.ts";
import { reconcileOwnWork, sweepAbandoned, type TakeoverDeps } from "./takeover.ts";
import type { AbortReason } from "./phase-end.ts";
import { RouteCache, type Route } from "./route-cache.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { defaultRunnerCommand } from "../runtime/agent-process.ts";
import { Launcher } from "../../confinement/index.ts";
import { RevisionRuntime } from "../runtime/revision-runtime.ts";
import { DeploymentsLayout } from "../layout.ts";
import { LiveRevision } from "./live-revision.ts";
import { LocalServers } from "./sole-server.ts";
import { dropDeploymentDatabase } from "../runtime/database-access.ts";
import type { EngineState } from "./engine-state.ts";
import { abortRollout, heartbeat, skipOlderWaiting, startPendingRollouts } from "./work-loop.ts";
import { superviseServing } from "./supervise.ts";
import { PresenceLock } from "../../cluster/index.ts";
import { OwnerWatch } from "./owner-watch.ts";

/**
 * Runs the deployments of this platform process: claims queued revisions (one rollout per
 * deployment, across every process on the database), builds and deploys them, switches the
 * stable URL, supervises the live agent servers, and takes over the work of processes that died.
 * By phase: the loop and its leases (`work-loop.ts`), takeover (`takeover.ts`), one rollout
 * (`rollout.ts`) with its build (`build-phase.ts`) and its deploy and switch (`deploy-phase.ts`),
 * supervision of the live servers (`supervise.ts`), and where a stable URL goes (`route-cache.ts`).
 */
export class RolloutEngine {
  readonly layout: DeploymentsLayout;
  readonly nodeId: string;
  readonly runtime: RevisionRuntime;
  private readonly s: EngineState;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private tickAgain = false;
  private readonly tasks = new Set<Promise<unknown>>();
  /** PostgreSQL: this process's presence lock, which tells the others at once when it dies. */
  private readonly presence: PresenceLock | null;
  private wakeTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly ctx: PlatformContext,
    options: DeploymentsOptions = {},
  ) {
    const opts = resolveOptions(options, ctx.config.settings.WHARF_DEPLOYMENT_ISOLATION, defaultRunnerCommand);
    this.layout = new DeploymentsLayout(ctx.config.home);
    this.nodeId = readNodeId(this.layout);
    const live = new Map<string, LiveRevision>();
    const dedicated = ctx.store.dedicatedConnection;
    this.presence = dedicated ? new PresenceLock(ctx.db, dedicated, this.nodeId, ctx.log) : null;
    const baseCacheDir =
      ctx.config.settings.WHARF_SANDBOX_BASE_CACHE || path.join(ctx.config.home, "sandboxes", "images");
    this.runtime = new RevisionRuntime(
      ctx,
      this.layout,
      new Launcher({ isolation: opts.isolation, scratchRoot: this.layout.scratch, baseCacheDir }),
      opts.runnerCommand,
      opts.runnerBinds,
      opts.packageManagerEnv ?? undefined,
    );
    this.s = {
      ctx,
      db: ctx.db,
      nodeId: this.nodeId,
      opts,
      layout: this.layout,
      runtime: this.runtime,
      live,
      rollouts: new Map(),
      routes: new RouteCache(ctx.db, this.nodeId, live),
      servers: new LocalServers(),
      restarting: new Set(),
      owners: new OwnerWatch(
        ctx.db,
        this.nodeId,
        this.presence,
        { graceMs: opts.presenceGraceMs, leaseMs: opts.leaseMs },
        (ms) => this.wakeIn(ms),
      ),
      stopped: false,
      sources: null,
      track: (p) => this.track(p),
      kick: () => this.kick(),
    };
  }

  // ---------------------------------------------------------------- lifecycle

  async start(): Promise<void> {
    this.layout.prepare();
    if (!this.s.opts.isolation)
      this.ctx.log.warn(
        "deployments run WITHOUT isolation (not root, no bubblewrap, or WHARF_DEPLOYMENT_ISOLATION=off): deployed code runs as the platform's user",
      );
    // Present before taking anything back: the others then leave this node's work to it.
    await this.presence?.start();
    await reconcileOwnWork(this.takeover());
    this.timer = setInterval(() => this.kick(), this.s.opts.pollIntervalMs);
    this.timer.unref();
    this.kick();
  }

  async stop(): Promise<void> {
    this.s.stopped = true;
    if (this.timer) clearInterval(this.timer);
    if (this.wakeTimer) clearTimeout(this.wakeTimer);
    for (const r of this.s.rollouts.values()) {
      r.reason ??= "shutdown";
      r.controller.abort();
    }
    await Promise.allSettled([...this.tasks]);
    // Never rejects: `kick` logs the loop's errors where it runs it.
    await this.ticking;
    // DEPLOYED revisions stay DEPLOYED: the next start serves them again.
    await Promise.allSettled([...this.s.live.values()].map((l) => l.proc.stop(3000)));
    await Promise.allSettled([...this.s.live.values()].map((l) => l.log.flush()));
    await this.ctx.db
      .updateTable("deployment_revisions")
      .set({ pid: null, serving_url: null, lease_until: null })
      .where("owner", "=", this.nodeId)
      .where("status", "=", "DEPLOYED")
      .execute()
      .catch((err) =>
        this.ctx.log.warn(
          { err },
          "could not clear this process's servers from its DEPLOYED revisions at shutdown (the next start does)",
        ),
      );
    this.s.live.clear();
    // Last: until its servers are stopped and its rows cleared, the others must not take over.
    await this.presence?.stop();
  }

  /** One extra tick in `ms` (the earliest asked for wins; the poll goes on meanwhile). */
  private wakeIn(ms: number): void {
    if (this.wakeTimer || this.s.stopped) return;
    this.wakeTimer = setTimeout(
      () => {
        this.wakeTimer = null;
        this.kick();
      },
      Math.max(0, ms),
    );
    this.wakeTimer.unref();
  }

  /** Runs the work loop soon (coalesced). */
  kick(): void {
    if (this.s.stopped) return;
    if (this.ticking) {
      this.tickAgain = true;
      return;
    }
    this.ticking = this.tick()
      .catch((err) => this.ctx.log.error({ err }, "deployments work loop failed"))
      .finally(() => {
        this.ticking = null;
        if (this.tickAgain && !this.s.stopped) {
          this.tickAgain = false;
          this.kick();
        }
      });
  }

  private track<T>(p: Promise<T>): void {
    this.tasks.add(p);
    void p
      .finally(() => this.tasks.delete(p))
      .catch((err) => this.ctx.log.error({ err }, "a deployments background task failed"));
  }

  // ---------------------------------------------------------------- work loop

  private async tick(): Promise<void> {
    await heartbeat(this.s);
    await this.s.owners.refresh();
    await sweepAbandoned(this.takeover(), (id) => this.s.rollouts.has(id));
    await startPendingRollouts(this.s);
    await superviseServing(this.s);
  }

  abortRollout(revisionId: string, reason: AbortReason): boolean {
    return abortRollout(this.s, revisionId, reason);
  }

  /** What the takeover of another process's work needs of the engine. */
  private takeover(): TakeoverDeps {
    return {
      db: this.ctx.db,
      nodeId: this.nodeId,
      runtime: this.runtime,
      log: this.ctx.log,
      gone: this.s.owners.gone,
    };
  }

  skipOlderWaiting(deploymentId: string, newestId: string): Promise<void> {
    return skipOlderWaiting(this.s, deploymentId, newestId);
  }

  // ---------------------------------------------------------------- serving

  /** The platform's request body limit, which the stable URL applies itself (it streams bodies past the app-wide limiter). */
  get bodyLimitBytes(): number {
    return this.ctx.config.bodyLimitBytes;
  }

  /** Where the stable URL of a deployment goes right now (see RouteCache). */
  route(deploymentId: string, fresh = false): Promise<Route> {
    return this.s.routes.route(deploymentId, fresh);
  }

  /** Forgets the cached route (after a change made by this process). */
  invalidate(deploymentId: string): void {
    this.s.routes.invalidate(deploymentId);
  }

  /** Stops everything of a deployment that is being deleted. */
  async forget(deploymentId: string, revisionIds: string[]): Promise<void> {
    const dep = await this.ctx.db
      .selectFrom("deployments")
      .select(["id", "workspace_id", "api_key_id"])
      .where("id", "=", deploymentId)
      .executeTakeFirst();
    for (const id of revisionIds) this.abortRollout(id, "cancel");
    const lives = [...this.s.live.values()].filter((l) => l.deploymentId === deploymentId);
    await Promise.allSettled(lives.map((l) => l.proc.stop(3000)));
    for (const l of lives) this.s.live.delete(l.revisionId);
    this.s.routes.invalidate(deploymentId);
    for (const id of revisionIds) {
      await this.runtime.killLeftover(id);
      this.runtime.removeSocket(id);
    }
    // The deployment's own database and files go with it, and the sandboxes its code created.
    // Starts in flight end first (`purge`), so none makes the role and schema again after the drop.
    await this.runtime.purge(deploymentId);
    // A failure here must not keep the deployment from being deleted: its servers are stopped and
    // its password goes with the row, so what is left is an unusable role for an operator to drop.
    await dropDeploymentDatabase(this.ctx, deploymentId).catch((err) =>
      this.ctx.log.error(
        { err, deployment: deploymentId },
        "could not drop the deployment's PostgreSQL schema and role",
      ),
    );
    if (dep) await this.runtime.deleteSandboxes(dep, null);
  }

  /** Removes a build folder that no revision references any more. */
  removeBuild(revisionId: string): void {
    fs.rmSync(this.layout.buildDir(revisionId), { recursive: true, force: true });
  }
}
