import { execFileSync } from "node:child_process";
import path from "node:path";
import type { PlatformContext } from "../../platform/context.ts";
import type { Database } from "../../store/schema.ts";
import type { AgentProcess, RunnerCommand } from "./agent-process.ts";
import type { BuildStep } from "../build/builder.ts";
import type { DeploymentsLayout } from "../layout.ts";
import type { Launcher } from "../../confinement/index.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import type { StoredProxyConfig } from "../../egress/index.ts";
import { readHostRegistries, type HostRegistries } from "../build/host-registries.ts";
import { DeploymentEgress } from "./revision-egress.ts";
import { agentEnv } from "./agent-env.ts";
import { runBuildStep } from "./build-step.ts";
import { deploymentIdentity, type DeploymentIdentity } from "./deployment-identity.ts";
import { deleteSandboxes, killLeftover, removeSocket, removeState } from "./revision-cleanup.ts";
import { startRevisionServer, type ServerDeps, type ServerStartArgs } from "./server-start.ts";

export { agentKeyAad, type DeploymentIdentity } from "./deployment-identity.ts";

type Deployment = Database["deployments"];

/**
 * Everything about running a deployment's code confined: its uid and key, the build steps, the
 * agent server process with its scrubbed environment, and its private state folder. The parts live
 * beside it by concern; this class owns what they share and what is in flight per deployment.
 */
export class RevisionRuntime {
  /** The parts' shared view of this runtime. */
  private readonly rt: ServerDeps;

  constructor(
    private readonly ctx: PlatformContext,
    layout: DeploymentsLayout,
    readonly launcher: Launcher,
    runner: RunnerCommand,
    runnerBinds: string[] = [],
    /** The environment the host's npm and pip are asked in (default: the platform's own). */
    private readonly packageManagerEnv?: NodeJS.ProcessEnv,
  ) {
    const egress = new DeploymentEgress(ctx.db, path.join(layout.root, "egress"), (p) => launcher.baseHas(p), ctx.log);
    this.egress = egress;
    this.rt = {
      ctx,
      layout,
      launcher,
      egress,
      runner,
      runnerBinds,
      get isolated() {
        return launcher.isolated;
      },
    };
  }

  private hostRegistriesRead: Promise<HostRegistries> | null = null;

  /** The host's package-manager configuration, asked once (at the first build step). */
  private hostRegistries(): Promise<HostRegistries> {
    this.hostRegistriesRead ??= readHostRegistries(this.packageManagerEnv).then((r) => {
      this.ctx.log.info({ npm: r.npm, pip: r.pip }, "builds follow the host's package registries");
      return r;
    });
    return this.hostRegistriesRead;
  }

  /** Every running process's way out, updated when the deployment's proxy_config changes. */
  private readonly egress: DeploymentEgress;
  /** Deployments being deleted: nothing of theirs starts any more (see `purge`). */
  private readonly deleted = new Set<string>();
  /** Server starts and build steps in flight, per deployment (`purge` waits for them). */
  private readonly inflight = new Map<string, Set<Promise<unknown>>>();

  private track<T>(deploymentId: string, work: () => Promise<T>): Promise<T> {
    if (this.deleted.has(deploymentId)) return Promise.reject(new Error("the deployment is being deleted"));
    const run = work();
    const set = this.inflight.get(deploymentId) ?? new Set<Promise<unknown>>();
    set.add(run);
    this.inflight.set(deploymentId, set);
    const done = () => {
      set.delete(run);
      if (set.size === 0 && this.inflight.get(deploymentId) === set) this.inflight.delete(deploymentId);
    };
    run.then(done, done);
    return run;
  }

  /** A PATCH of the deployment's proxy_config: its running servers and build steps get the new rules now. */
  updateEgress(deploymentId: string, proxyConfig: StoredProxyConfig | null): Promise<void> {
    return this.egress.update(deploymentId, proxyConfig);
  }

  /**
   * The end of a deleted deployment on this machine: nothing of it starts any more, starts and
   * build steps in flight have ended (a start racing the deletion stops itself), then its state
   * folder and npm cache are removed. DELETE answers after this, so the folder is gone by then.
   */
  async purge(deploymentId: string): Promise<void> {
    this.deleted.add(deploymentId);
    await Promise.allSettled([...(this.inflight.get(deploymentId) ?? [])]);
    this.removeState(deploymentId);
  }

  private get isolated(): boolean {
    return this.launcher.isolated;
  }

  /** The deployment's uid and agent key, allocated on first use (unique across processes). */
  identity(deployment: Deployment): Promise<DeploymentIdentity> {
    return deploymentIdentity(this.ctx, deployment);
  }

  /** Hands a freshly fetched build to the deployment's uid (its own steps write it from now on). */
  adoptBuild(artifactDir: string, uid: number): void {
    if (!this.isolated) return;
    execFileSync("chown", ["-R", "--no-dereference", `${uid}:${uid}`, artifactDir]);
  }

  /**
   * Runs build steps confined as the deployment, their output going to the build log. Each step
   * reaches out only through the egress proxy, under the deployment's `proxy_config` with its
   * package registries allowed.
   */
  buildStep(
    deployment: Deployment,
    revisionId: string,
    ident: DeploymentIdentity,
    log: RevisionLog,
    signal: AbortSignal,
  ): BuildStep {
    const job = { deployment, revisionId, ident, log, signal };
    return (step) => this.track(deployment.id, () => runBuildStep(this.rt, () => this.hostRegistries(), job, step));
  }

  /**
   * Starts a revision's agent server; it listens on a unix socket only the platform reaches. Never
   * for a deployment being deleted: a start racing the deletion stops again before `purge` removes
   * the state folder, so the folder cannot come back.
   */
  startServer(...a: ServerStartArgs): Promise<AgentProcess> {
    const deploymentId = a[0].id;
    return this.track(deploymentId, async () => {
      const proc = await startRevisionServer(this.rt, ...a);
      if (this.deleted.has(deploymentId)) {
        await proc.stop(0);
        throw new Error("the deployment is being deleted");
      }
      return proc;
    });
  }

  /**
   * The agent server's whole environment: the deployment's secrets and its own identifiers and key.
   * Nothing of the platform's (no WHARF_HOME, DATABASE_URL, master key, host variables).
   */
  agentEnv(
    deployment: Deployment,
    revisionId: string,
    secrets: Array<{ name: string; value: string }>,
    ident: DeploymentIdentity,
    stateDir: string,
  ): Record<string, string> {
    return agentEnv(this.rt, deployment, revisionId, secrets, ident, stateDir);
  }

  /** Deletes the sandboxes a revision (or, without one, the whole deployment) created. */
  deleteSandboxes(
    deployment: { id: string; workspace_id: string; api_key_id: string },
    revisionId: string | null,
    log?: RevisionLog,
  ): Promise<void> {
    return deleteSandboxes(this.rt, deployment, revisionId, log);
  }

  /** Kills what a dead platform process left of a revision's server (its cgroup). */
  killLeftover(revisionId: string): Promise<void> {
    return killLeftover(this.rt, revisionId);
  }

  /** Removes a deleted deployment's private state (its database) and npm cache. */
  removeState(deploymentId: string): void {
    removeState(this.rt, deploymentId);
  }

  removeSocket(revisionId: string): void {
    removeSocket(revisionId);
  }
}
