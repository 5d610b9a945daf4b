import fs from "node:fs";
import path from "node:path";
import type { Kysely } from "kysely";
import { resolveOptions, type DeploymentsOptions, type Resolved } from "./options.ts";
import { readNodeId } from "./node-id.ts";
import { hasCustomAuth, smokeInputOf } from "./project-flags.ts";
import { reconcileOwnWork, releaseLock, sweepAbandoned, type TakeoverDeps } from "./takeover.ts";
import { endFailedPhase, phaseSignal, type AbortReason } from "./phase-end.ts";
import { RouteCache, ROUTE_TTL_MS, type Route } from "./route-cache.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import type { Database } from "../../store/schema.ts";
import { defaultRunnerCommand } from "../runtime/agent-process.ts";
import { buildRevision, buildStillThere } from "../build/builder.ts";
import { openSecrets } from "../store/deployment-secrets.ts";
import type { DeploymentRevisionsTable } from "../store/deployments-tables.ts";
import { checkReady, waitUntilUp } from "./health.ts";
import { Launcher } from "../../confinement/index.ts";
import { RevisionRuntime } from "../runtime/revision-runtime.ts";
import { DeploymentsLayout } from "../layout.ts";
import { LiveRevision } from "./live-revision.ts";
import { RevisionLog } from "../store/revision-logs.ts";
import { LostRevision, transition, type RevisionStatus } from "./revision-states.ts";
import { LocalServers, soleServer, type LocalServer, type OtherRevision } from "./sole-server.ts";
import { dropDeploymentDatabase } from "../runtime/database-access.ts";
import type { SourcePolicy } from "../build/sources.ts";
import { localSourceRoots } from "../example-deployment.ts";
import { outboundPolicy } from "../../egress/index.ts";

type Revision = DeploymentRevisionsTable;

/**
 * Runs the deployments of this platform process: claims queued revisions (one rollout per
 * deployment, across every process on the database), builds and deploys them, switches the
 * stable URL, supervises the live agent servers, and takes over the work of processes that died.
 */
export class RolloutEngine {
  readonly layout: DeploymentsLayout;
  readonly nodeId: string;
  private readonly opts: Resolved;
  private readonly db: Kysely<Database>;
  private readonly live = new Map<string, LiveRevision>();
  private readonly rollouts = new Map<
    string,
    { controller: AbortController; reason: AbortReason | null; deploymentId: string }
  >();
  private readonly routes: RouteCache;
  private timer: NodeJS.Timeout | null = null;
  private ticking: Promise<void> | null = null;
  private tickAgain = false;
  private stopped = false;
  readonly runtime: RevisionRuntime;
  private readonly tasks = new Set<Promise<unknown>>();
  /** Agent servers of this process, starting or running: a start decides `--exclusive` by them. */
  private readonly servers = new LocalServers();

  constructor(
    private readonly ctx: PlatformContext,
    options: DeploymentsOptions = {},
  ) {
    this.db = ctx.db;
    this.opts = resolveOptions(options, ctx.config.settings.WHARF_DEPLOYMENT_ISOLATION, defaultRunnerCommand);
    this.layout = new DeploymentsLayout(ctx.config.home);
    this.nodeId = readNodeId(this.layout);
    this.routes = new RouteCache(this.db, this.nodeId, this.live);
    const baseCacheDir =
      ctx.config.settings.WHARF_SANDBOX_BASE_CACHE || path.join(ctx.config.home, "sandboxes", "images");
    this.runtime = new RevisionRuntime(
      ctx,
      this.layout,
      new Launcher({ isolation: this.opts.isolation, scratchRoot: this.layout.scratch, baseCacheDir }),
      this.opts.runnerCommand,
      this.opts.runnerBinds,
      this.opts.packageManagerEnv ?? undefined,
    );
  }

  // ---------------------------------------------------------------- lifecycle

  async start(): Promise<void> {
    this.layout.prepare();
    if (!this.opts.isolation)
      this.ctx.log.warn(
        "deployments run WITHOUT isolation (not root, no bubblewrap, or WHARF_DEPLOYMENT_ISOLATION=off): deployed code runs as the platform's user",
      );
    await this.reconcileOwnWork();
    this.timer = setInterval(() => this.kick(), this.opts.pollIntervalMs);
    this.timer.unref();
    this.kick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearInterval(this.timer);
    for (const r of this.rollouts.values()) {
      r.reason ??= "shutdown";
      r.controller.abort();
    }
    await Promise.allSettled([...this.tasks]);
    // Never rejects: `kick` logs the loop's errors where it runs it.
    await this.ticking;
    // DEPLOYED revisions stay DEPLOYED: the next start serves them again.
    await Promise.allSettled([...this.live.values()].map((l) => l.proc.stop(3000)));
    await Promise.allSettled([...this.live.values()].map((l) => l.log.flush()));
    await this.db
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
    this.live.clear();
  }

  /** Runs the work loop soon (coalesced). */
  kick(): void {
    if (this.stopped) return;
    if (this.ticking) {
      this.tickAgain = true;
      return;
    }
    this.ticking = this.tick()
      .catch((err) => this.ctx.log.error({ err }, "deployments work loop failed"))
      .finally(() => {
        this.ticking = null;
        if (this.tickAgain && !this.stopped) {
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
    await this.heartbeat();
    await this.sweepAbandoned();
    await this.startPendingRollouts();
    await this.superviseServing();
  }

  private leaseUntil(): string {
    return new Date(Date.now() + this.opts.leaseMs).toISOString();
  }

  /** Extends this process's leases and notices interrupts requested through another process. */
  private async heartbeat(): Promise<void> {
    const until = this.leaseUntil();
    const revisionIds = [...this.rollouts.keys(), ...this.live.keys()];
    if (revisionIds.length) {
      await this.db
        .updateTable("deployment_revisions")
        .set({ lease_until: until })
        .where("owner", "=", this.nodeId)
        .where("id", "in", revisionIds)
        .execute();
      const deploymentIds = [...new Set([...this.rollouts.values()].map((r) => r.deploymentId))];
      if (deploymentIds.length) {
        await this.db
          .updateTable("deployments")
          .set({ rollout_lease_until: until })
          .where("rollout_owner", "=", this.nodeId)
          .where("id", "in", deploymentIds)
          .execute();
      }
    }
    if (this.rollouts.size) {
      const cancelled = await this.db
        .selectFrom("deployment_revisions")
        .select("id")
        .where("id", "in", [...this.rollouts.keys()])
        .where("cancel_requested", "=", 1)
        .execute();
      for (const { id } of cancelled) this.abortRollout(id, "cancel");
    }
  }

  abortRollout(revisionId: string, reason: AbortReason): boolean {
    const r = this.rollouts.get(revisionId);
    if (!r) return false;
    r.reason ??= reason;
    r.controller.abort();
    return true;
  }

  private reconcileOwnWork(): Promise<void> {
    return reconcileOwnWork(this.takeover());
  }

  private sweepAbandoned(): Promise<void> {
    return sweepAbandoned(this.takeover(), (id) => this.rollouts.has(id));
  }

  /** What the takeover of another process's work needs of the engine. */
  private takeover(): TakeoverDeps {
    return { db: this.db, nodeId: this.nodeId, runtime: this.runtime, log: this.ctx.log };
  }

  private releaseLock(deploymentId: string, revisionId: string, owner: string | null): Promise<void> {
    return releaseLock(this.db, deploymentId, revisionId, owner);
  }

  /** Claims the per-deployment rollout lock for deployments with waiting revisions and runs them. */
  private async startPendingRollouts(): Promise<void> {
    if (this.stopped) return;
    const waiting = await this.db
      .selectFrom("deployment_revisions")
      .select(["deployment_id"])
      .distinct()
      .where("status", "in", ["QUEUED", "AWAITING_BUILD", "AWAITING_DEPLOY"])
      .where("owner", "is", null)
      .execute();
    for (const { deployment_id } of waiting) {
      if ([...this.rollouts.values()].some((r) => r.deploymentId === deployment_id)) continue;
      const rev = await this.db
        .selectFrom("deployment_revisions")
        .selectAll()
        .where("deployment_id", "=", deployment_id)
        .where("status", "in", ["QUEUED", "AWAITING_BUILD", "AWAITING_DEPLOY"])
        .where("owner", "is", null)
        .orderBy("id", "desc")
        .executeTakeFirst();
      if (!rev) continue;
      const now = nowIso();
      const lock = await this.db
        .updateTable("deployments")
        .set({ rollout_revision_id: rev.id, rollout_owner: this.nodeId, rollout_lease_until: this.leaseUntil() })
        .where("id", "=", deployment_id)
        .where((eb) => eb.or([eb("rollout_owner", "is", null), eb("rollout_lease_until", "<", now)]))
        .executeTakeFirst();
      if (Number(lock.numUpdatedRows) !== 1) continue;
      // Only the newest waiting revision runs; older waiting ones were superseded.
      await this.skipOlderWaiting(deployment_id, rev.id);
      this.runRollout(rev);
    }
  }

  async skipOlderWaiting(deploymentId: string, newestId: string): Promise<void> {
    const older = await this.db
      .selectFrom("deployment_revisions")
      .select(["id", "status"])
      .where("deployment_id", "=", deploymentId)
      .where("id", "<", newestId)
      .where("status", "in", ["CREATING", "QUEUED", "AWAITING_BUILD", "AWAITING_DEPLOY"])
      .where("owner", "is", null)
      .execute();
    for (const o of older) {
      await transition(this.db, o.id, [o.status as RevisionStatus], "SKIPPED", {
        owner: null,
        reason: `superseded by revision ${newestId}`,
        set: { status_message: `Skipped: superseded by revision ${newestId}` },
      }).catch((err) => {
        if (!(err instanceof LostRevision)) throw err;
      });
    }
  }

  private runRollout(rev: Revision): void {
    const controller = new AbortController();
    const entry = { controller, reason: null as AbortReason | null, deploymentId: rev.deployment_id };
    this.rollouts.set(rev.id, entry);
    const task = this.rollout(rev, entry)
      .catch((err) => this.ctx.log.error({ err, revision: rev.id }, "rollout failed unexpectedly"))
      .finally(async () => {
        this.rollouts.delete(rev.id);
        await this.releaseLock(rev.deployment_id, rev.id, this.nodeId).catch((err) =>
          this.ctx.log.warn({ err, revision: rev.id }, "rollout lock not released (it lapses with its lease)"),
        );
        this.kick();
      });
    this.track(task);
  }

  // ---------------------------------------------------------------- one rollout

  private async rollout(
    rev: Revision,
    entry: { controller: AbortController; reason: AbortReason | null },
  ): Promise<void> {
    const claim = await this.db
      .updateTable("deployment_revisions")
      .set({ owner: this.nodeId, lease_until: this.leaseUntil(), updated_at: nowIso() })
      .where("id", "=", rev.id)
      .where("status", "=", rev.status)
      .where("owner", "is", null)
      .executeTakeFirst();
    if (Number(claim.numUpdatedRows) !== 1) return;
    const deployment = await this.db
      .selectFrom("deployments")
      .selectAll()
      .where("id", "=", rev.deployment_id)
      .executeTakeFirst();
    if (!deployment) return;
    const secrets = openSecrets(this.ctx.box, deployment);
    const redactions = secrets.map((s) => s.value);
    const buildLog = new RevisionLog(this.db, rev.id, "build", redactions);
    const deployLog = new RevisionLog(this.db, rev.id, "deploy", redactions);
    const me = this.nodeId;
    let status = rev.status as RevisionStatus;
    try {
      if (status === "QUEUED") {
        await transition(this.db, rev.id, ["QUEUED"], "AWAITING_BUILD", { owner: me, reason: `claimed by ${me}` });
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
        const reused = rev.reuse_build_of ? await this.reusableBuild(rev.reuse_build_of) : null;
        if (reused) {
          buildLog.line(`reusing the build of revision ${rev.reuse_build_of} (no rebuild)`);
          await transition(this.db, rev.id, ["AWAITING_BUILD"], "AWAITING_DEPLOY", {
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
          const built = await this.buildPhase(
            rev,
            deployment,
            entry,
            buildLog,
            Object.fromEntries(secrets.map((s) => [s.name, s.value])),
          );
          if (!built) return;
          project = { ...project, ...built };
        }
        status = "AWAITING_DEPLOY";
      }
      await buildLog.flush();
      const configPath = JSON.parse(rev.source_revision_config).langgraph_config_path as string;
      project.configFile ??= path.join(rev.artifact_dir ?? this.layout.buildDir(rev.id), configPath);
      if (project.projectDir)
        project.hasCustomAuth = hasCustomAuth(path.join(project.projectDir, path.basename(configPath)));
      await this.deployPhase(
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

  private async reusableBuild(revisionId: string) {
    const r = await this.db
      .selectFrom("deployment_revisions")
      .select(["artifact_dir", "project_dir", "graphs", "repo_commit_sha"])
      .where("id", "=", revisionId)
      .executeTakeFirst();
    return r && r.project_dir && r.graphs && buildStillThere(r.project_dir)
      ? (r as typeof r & { project_dir: string })
      : null;
  }

  /** What builds may fetch from, once read (see `sourcePolicy`). */
  private sources: SourcePolicy | null = null;
  /** What builds may fetch from (operator settings, read once). */
  private sourcePolicy(): SourcePolicy {
    const s = this.ctx.config.settings;
    this.sources ??= {
      localRoots: localSourceRoots(s),
      maxLocalBytes: s.WHARF_UPLOAD_LIMIT_BYTES,
      outbound: outboundPolicy(s),
    };
    return this.sources;
  }

  private async buildPhase(
    rev: Revision,
    deployment: Database["deployments"],
    entry: { controller: AbortController; reason: AbortReason | null },
    log: RevisionLog,
    env: Record<string, string>,
  ) {
    const me = this.nodeId;
    const deadline = new Date(Date.now() + this.opts.buildTimeoutMs).toISOString();
    await transition(this.db, rev.id, ["AWAITING_BUILD"], "BUILDING", {
      owner: me,
      reason: "build started",
      set: { phase_deadline: deadline },
    });
    const phase = phaseSignal(entry, this.opts.buildTimeoutMs);
    const src = JSON.parse(rev.source_revision_config) as Record<string, string | null>;
    const bc = JSON.parse(rev.build_config) as Record<string, string | null>;
    try {
      const ident = await this.runtime.identity(deployment);
      const out = await buildRevision(
        {
          revisionId: rev.id,
          source: {
            source_tarball_path: src.source_tarball_path,
            local_path: src.local_path,
            repo_url: bc.repo_url,
            repo_ref: src.repo_ref,
          },
          langgraphConfigPath: src.langgraph_config_path!,
          installCommand: bc.install_command ?? null,
          buildCommand: bc.build_command ?? null,
          env,
        },
        {
          layout: this.layout,
          log,
          signal: phase.signal,
          home: this.ctx.config.home,
          sources: this.sourcePolicy(),
          workspaceId: deployment.workspace_id,
          step: this.runtime.buildStep(deployment, rev.id, ident, log, phase.signal),
          afterFetch: (dir) => this.runtime.adoptBuild(dir, ident.uid),
        },
      );
      await transition(this.db, rev.id, ["BUILDING"], "AWAITING_DEPLOY", {
        owner: me,
        reason: "build succeeded",
        set: {
          artifact_dir: out.artifactDir,
          project_dir: out.projectDir,
          graphs: JSON.stringify(out.graphs),
          repo_commit_sha: out.commitSha,
        },
      });
      return {
        artifactDir: out.artifactDir,
        projectDir: out.projectDir,
        configFile: out.configFile,
        graphs: out.graphs,
        hasCustomAuth: out.hasCustomAuth,
      };
    } catch (err) {
      if (err instanceof LostRevision) throw err;
      await this.failPhase(rev, "BUILDING", "BUILD_FAILED", entry.reason, err as Error, log, this.opts.buildTimeoutMs);
      return null;
    } finally {
      phase.clear();
    }
  }

  /** Ends a phase that threw (see `endFailedPhase`). */
  private failPhase(
    rev: Revision,
    from: RevisionStatus,
    failed: RevisionStatus,
    reason: AbortReason | null,
    err: Error,
    log: RevisionLog,
    deadlineMs: number,
  ): Promise<void> {
    return endFailedPhase(
      { db: this.db, nodeId: this.nodeId, log: this.ctx.log },
      rev,
      from,
      failed,
      reason,
      err,
      log,
      deadlineMs,
    );
  }

  /**
   * Starts an agent server for a built revision (confined); `/ok` is awaited by the caller, which
   * then calls `live.here.up()` (its failure stops the process, which does the same). Waits first
   * for the deployment's other starts in this process (see LocalServers).
   */
  private async startProcess(
    deployment: Database["deployments"],
    revisionId: string,
    project: { artifactDir: string; projectDir: string; configFile: string },
    secrets: Array<{ name: string; value: string }>,
    log: RevisionLog,
    signal?: AbortSignal,
  ): Promise<LiveRevision> {
    const here = this.servers.begin(deployment.id, revisionId);
    try {
      const waitStarted = performance.now();
      const theirTurnEnded = await here.turn(signal);
      const waited = Math.round(performance.now() - waitStarted);
      if (!theirTurnEnded)
        log.line(
          `another server of the deployment starting here did not answer GET /ok within ${waited} ms: starting beside it`,
          "warning",
        );
      else if (waited >= 100)
        log.line(`waited ${waited} ms for another server of the deployment starting here to answer GET /ok`);
      // The wait may have ended with the platform's shutdown (the other start was aborted by it).
      if (this.stopped) throw new Error("the platform is shutting down");
      const exclusive = await this.soleServerOf(here);
      const proc = await this.runtime.startServer(deployment, revisionId, project, secrets, log, { exclusive });
      void proc.exited.then(() => here.end());
      log.line(
        `started the agent server (pid ${proc.pid}${this.opts.isolation ? ", confined" : ""}${exclusive ? ", the deployment's only server" : ""}) on ${proc.url}`,
      );
      return new LiveRevision(deployment.id, revisionId, proc, log, here);
    } catch (err) {
      here.end();
      throw err;
    }
  }

  /** Whether no other revision of the deployment runs, here or in a live platform process (see sole-server.ts). */
  private async soleServerOf(here: LocalServer): Promise<boolean> {
    const rows = await this.db
      .selectFrom("deployment_revisions")
      .select(["id", "owner", "lease_until", "pid", "serving_url"])
      .where("deployment_id", "=", here.deploymentId)
      .where("id", "!=", here.revisionId)
      .where("owner", "is not", null)
      .execute();
    const others: OtherRevision[] = rows.map((r) => ({
      runningHere: false,
      owner: r.owner,
      leaseUntil: r.lease_until,
      hasServer: r.pid !== null || r.serving_url !== null,
    }));
    return soleServer([...others, ...here.others()], this.nodeId, nowIso());
  }

  private async deployPhase(
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
    const me = this.nodeId;
    const deadline = new Date(Date.now() + this.opts.deployTimeoutMs).toISOString();
    await transition(this.db, rev.id, ["AWAITING_DEPLOY"], "DEPLOYING", {
      owner: me,
      reason: "deploy started",
      set: { phase_deadline: deadline },
    });
    const phase = phaseSignal(entry, this.opts.deployTimeoutMs);
    let live: LiveRevision | null = null;
    try {
      live = await this.startProcess(
        deployment,
        rev.id,
        { ...project, artifactDir: project.artifactDir ?? this.layout.buildDir(rev.id) },
        secrets,
        log,
        phase.signal,
      );
      await this.db
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
        timeoutMs: Math.min(60_000, this.opts.deployTimeoutMs),
        smokeInput: smokeInputOf(deployment),
      });
      phase.clear();
      await this.switchTo(rev, live);
      live = null;
    } catch (err) {
      if (err instanceof LostRevision) throw err;
      const exited = live && !live.proc.running;
      live?.here.up();
      await live?.proc.stop(2000);
      if (exited) log.line(`the agent server exited with code ${await live!.proc.exited}`, "error");
      await this.failPhase(
        rev,
        "DEPLOYING",
        "DEPLOY_FAILED",
        entry.reason,
        err as Error,
        log,
        this.opts.deployTimeoutMs,
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
  private async switchTo(rev: Revision, live: LiveRevision): Promise<void> {
    const me = this.nodeId;
    const now = nowIso();
    let previous: string | null = null;
    await this.db.transaction().execute(async (tx) => {
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
          lease_until: this.leaseUntil(),
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
    this.live.set(rev.id, live);
    this.routes.invalidate(rev.deployment_id);
    live.log.line(`DEPLOYED: serving the deployment's URL${previous ? ` (replacing revision ${previous})` : ""}`);
    if (previous && previous !== rev.id) this.retire(previous, `replaced by revision ${rev.id}`);
  }

  /** Stops a replaced revision after its in-flight requests finish (and caches elsewhere expire). */
  private retire(revisionId: string, why: string): void {
    const old = this.live.get(revisionId);
    if (!old || old.draining) return;
    old.draining = true;
    const task = (async () => {
      const started = Date.now();
      await new Promise((r) => setTimeout(r, ROUTE_TTL_MS));
      const drained = await old.drained(Math.max(0, this.opts.drainTimeoutMs - (Date.now() - started)));
      old.log.line(
        drained
          ? `${why}: drained, stopping`
          : `${why}: ${old.inflight} request(s) still running after the drain timeout, stopping anyway`,
        drained ? "info" : "warning",
      );
      await old.proc.stop(5000);
      this.runtime.removeSocket(revisionId);
      const dep = await this.db
        .selectFrom("deployments")
        .select(["id", "workspace_id", "api_key_id"])
        .where("id", "=", old.deploymentId)
        .executeTakeFirst();
      if (dep) await this.runtime.deleteSandboxes(dep, revisionId, old.log);
      if (this.live.get(revisionId) === old) this.live.delete(revisionId);
      await old.log.flush();
      await this.db
        .updateTable("deployment_revisions")
        .set({ pid: null, serving_url: null, owner: null, lease_until: null })
        .where("id", "=", revisionId)
        .where("owner", "=", this.nodeId)
        .execute();
    })();
    this.track(task);
  }

  // ---------------------------------------------------------------- serving

  /**
   * Keeps the active revision of every deployment served by exactly one process: starts the ones
   * nobody serves (after a restart, or when their server's lease ran out), restarts crashed
   * servers with backoff, and retires local servers that are no longer active.
   */
  private async superviseServing(): Promise<void> {
    if (this.stopped) return;
    const now = nowIso();
    const active = await this.db
      .selectFrom("deployments")
      .innerJoin("deployment_revisions", "deployment_revisions.id", "deployments.active_revision_id")
      .selectAll("deployment_revisions")
      .select(["deployments.workspace_id as dep_workspace_id"])
      .where("deployment_revisions.status", "=", "DEPLOYED")
      .where((eb) =>
        eb.or([
          eb("deployment_revisions.owner", "is", null),
          eb("deployment_revisions.owner", "=", this.nodeId),
          eb("deployment_revisions.lease_until", "is", null),
          eb("deployment_revisions.lease_until", "<", now),
        ]),
      )
      .execute();
    const activeIds = new Set(active.map((r) => r.id));
    for (const rev of active) {
      if (this.rollouts.has(rev.id)) continue; // being switched to right now
      const live = this.live.get(rev.id);
      if (live && live.proc.running) continue;
      if (live && Date.now() < live.nextRestartAt) continue;
      this.track(this.serveAgain(rev, live ?? null));
    }
    for (const [id, live] of this.live) {
      if (live.draining || activeIds.has(id)) continue;
      const still = await this.db
        .selectFrom("deployments")
        .select(["active_revision_id"])
        .where("id", "=", live.deploymentId)
        .executeTakeFirst();
      if (still?.active_revision_id !== id)
        this.retire(id, still ? `revision ${still.active_revision_id} became active` : "the deployment was deleted");
    }
  }

  private readonly restarting = new Set<string>();

  /** Starts (or restarts) the server of a DEPLOYED active revision without changing its status. */
  private async serveAgain(rev: Revision, previous: LiveRevision | null): Promise<void> {
    if (this.restarting.has(rev.id)) return;
    this.restarting.add(rev.id);
    try {
      const claim = await this.db
        .updateTable("deployment_revisions")
        .set({ owner: this.nodeId, lease_until: this.leaseUntil() })
        .where("id", "=", rev.id)
        .where("status", "=", "DEPLOYED")
        .where((eb) =>
          eb.or([
            eb("owner", "is", null),
            eb("owner", "=", this.nodeId),
            eb("lease_until", "is", null),
            eb("lease_until", "<", nowIso()),
          ]),
        )
        .executeTakeFirst();
      if (Number(claim.numUpdatedRows) !== 1) return;
      const deployment = await this.db
        .selectFrom("deployments")
        .selectAll()
        .where("id", "=", rev.deployment_id)
        .executeTakeFirst();
      if (!deployment || !rev.project_dir || !buildStillThere(rev.project_dir)) {
        this.ctx.log.error({ revision: rev.id }, "the active revision's build is gone; it cannot be served again");
        return;
      }
      const secrets = openSecrets(this.ctx.box, deployment);
      const log =
        previous?.log ??
        new RevisionLog(
          this.db,
          rev.id,
          "deploy",
          secrets.map((s) => s.value),
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
      const live = await this.startProcess(
        deployment,
        rev.id,
        {
          artifactDir: rev.artifact_dir ?? this.layout.buildDir(rev.id),
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
      this.live.set(rev.id, live);
      const controller = new AbortController();
      const timer = setTimeout(() => controller.abort(), this.opts.deployTimeoutMs);
      try {
        await waitUntilUp(live.proc, controller.signal, log);
        live.here.up();
        await this.db
          .updateTable("deployment_revisions")
          .set({ serving_url: live.url, pid: live.proc.pid ?? null })
          .where("id", "=", rev.id)
          .execute();
        live.markReady();
        this.routes.invalidate(rev.deployment_id);
      } catch (err) {
        log.line(`the agent server did not come up: ${(err as Error).message}`, "error");
        live.here.up();
        live.markFailed(err as Error);
        await live.proc.stop(2000);
      } finally {
        clearTimeout(timer);
        await log.flush();
      }
    } finally {
      this.restarting.delete(rev.id);
    }
  }

  /** The platform's request body limit, which the stable URL applies itself (it streams bodies past the app-wide limiter). */
  get bodyLimitBytes(): number {
    return this.ctx.config.bodyLimitBytes;
  }

  /** Where the stable URL of a deployment goes right now (see RouteCache). */
  route(deploymentId: string, fresh = false): Promise<Route> {
    return this.routes.route(deploymentId, fresh);
  }

  /** Forgets the cached route (after a change made by this process). */
  invalidate(deploymentId: string): void {
    this.routes.invalidate(deploymentId);
  }

  /** Stops everything of a deployment that is being deleted. */
  async forget(deploymentId: string, revisionIds: string[]): Promise<void> {
    const dep = await this.db
      .selectFrom("deployments")
      .select(["id", "workspace_id", "api_key_id"])
      .where("id", "=", deploymentId)
      .executeTakeFirst();
    for (const id of revisionIds) this.abortRollout(id, "cancel");
    const lives = [...this.live.values()].filter((l) => l.deploymentId === deploymentId);
    await Promise.allSettled(lives.map((l) => l.proc.stop(3000)));
    for (const l of lives) this.live.delete(l.revisionId);
    this.routes.invalidate(deploymentId);
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
