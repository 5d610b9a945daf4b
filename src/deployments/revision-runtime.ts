import crypto from "node:crypto";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import type { PlatformContext } from "../platform/context.ts";
import type { Database } from "../store/schema.ts";
import { AgentProcess, type RunnerCommand } from "./agent-process.ts";
import type { BuildStep } from "./builder.ts";
import { buildLimits, buildPlan, insidePath, type MountPlan, DEPLOYMENT_UID_BASE, limitsFor, servePlan, SOCKET_DIR_INSIDE, SOCKET_NAME, socketRoot, STATE_INSIDE } from "./confinement.ts";
import type { DeploymentsLayout } from "./layout.ts";
import { ownFolder, type Launcher } from "./launcher.ts";
import type { RevisionLog } from "./revision-logs.ts";
import { CommandFailed } from "./run-command.ts";

type Deployment = Database["deployments"];

/** What a deployment's processes run as and seal with. */
export interface DeploymentIdentity {
  uid: number;
  /** The deployment's own agent-server key (base64), its agent server's WHARF_MASTER_KEY. */
  agentKey: string;
}

export const agentKeyAad = (workspaceId: string, deploymentId: string) => `deployment-agent-key:${workspaceId}:${deploymentId}`;

/**
 * Everything about running a deployment's code confined: its uid and key, the build steps, the
 * agent server process with its scrubbed environment, and its private state folder.
 */
export class RevisionRuntime {
  constructor(
    private readonly ctx: PlatformContext,
    private readonly layout: DeploymentsLayout,
    readonly launcher: Launcher,
    private readonly runner: RunnerCommand,
    private readonly runnerBinds: string[] = [],
  ) {}

  private get isolated(): boolean {
    return this.launcher.isolated;
  }

  /** The deployment's uid and agent key, allocated on first use (unique across processes). */
  async identity(deployment: Deployment): Promise<DeploymentIdentity> {
    const db = this.ctx.db;
    let row = deployment;
    for (let attempt = 0; row.run_uid === null && attempt < 20; attempt++) {
      const max = await db.selectFrom("deployments").select((eb) => eb.fn.max("run_uid").as("m")).executeTakeFirst();
      const uid = Math.max(DEPLOYMENT_UID_BASE, Number(max?.m ?? 0) + 1);
      try {
        await db.updateTable("deployments").set({ run_uid: uid }).where("id", "=", row.id).where("run_uid", "is", null).execute();
      } catch {
        // Another process took that uid for another deployment at the same moment: try the next.
      }
      row = (await db.selectFrom("deployments").selectAll().where("id", "=", row.id).executeTakeFirst()) ?? row;
    }
    const uid = row.run_uid;
    if (uid === null) throw new Error("could not allocate a uid for the deployment");
    if (!row.agent_key_ciphertext) {
      const sealed = this.ctx.box.seal(crypto.randomBytes(32).toString("base64"), agentKeyAad(row.workspace_id, row.id));
      await db.updateTable("deployments").set({ agent_key_key_id: sealed.keyId, agent_key_ciphertext: sealed.blob }).where("id", "=", row.id).where("agent_key_ciphertext", "is", null).execute();
      row = (await db.selectFrom("deployments").selectAll().where("id", "=", row.id).executeTakeFirst()) ?? row;
    }
    const agentKey = this.ctx.box.open({ keyId: row.agent_key_key_id!, blob: row.agent_key_ciphertext! }, agentKeyAad(row.workspace_id, row.id));
    return { uid, agentKey };
  }

  /** A host path as the confined process sees it (unchanged without isolation). */
  private inside(p: string): string {
    return this.isolated ? insidePath(this.layout, p) : p;
  }

  /** Hands a freshly fetched build to the deployment's uid (its own steps write it from now on). */
  adoptBuild(artifactDir: string, uid: number): void {
    if (!this.isolated) return;
    execFileSync("chown", ["-R", "--no-dereference", `${uid}:${uid}`, artifactDir]);
  }

  /** Runs build steps confined as the deployment, their output going to the build log. */
  buildStep(deployment: Deployment, revisionId: string, ident: DeploymentIdentity, log: RevisionLog, signal: AbortSignal): BuildStep {
    const limits = buildLimits(limitsFor(resourceSpecOf(deployment)));
    const npmCache = this.layout.npmCacheFor(deployment.id);
    return async (step) => {
      signal.throwIfAborted();
      ownFolder(npmCache, ident.uid, this.isolated);
      const artifactDir = this.layout.buildDir(revisionId);
      const env: Record<string, string> = {
        PATH: "/usr/bin:/bin",
        HOME: this.isolated ? "/tmp" : npmCache,
        LANG: process.env.LANG ?? "C.UTF-8",
        npm_config_cache: this.isolated ? "/npm-cache" : npmCache,
        ...step.env,
      };
      const launched = await this.launcher.launch({
        id: `dep-build-${revisionId}`,
        uid: ident.uid,
        limits,
        plan: buildPlan({ layout: this.layout, artifactDir, projectDir: step.cwd, npmCache, writable: step.writable }),
        argv: step.argv.map((a) => this.inside(a)),
        env,
        cwd: this.inside(step.cwd),
      });
      let captured = "";
      launched.stdout.on("data", step.capture ? (d: Buffer) => (captured += d.toString()) : log.lineSink("info"));
      launched.stderr.on("data", log.lineSink("info"));
      const kill = () => void launched.stop(0);
      signal.addEventListener("abort", kill, { once: true });
      try {
        const code = await launched.exited;
        await launched.stop(0);
        signal.throwIfAborted();
        if (code !== 0) throw new CommandFailed(`${step.what} failed (exit ${code ?? "signal"})`);
        return captured;
      } finally {
        signal.removeEventListener("abort", kill);
      }
    };
  }

  /** Starts a revision's agent server; it listens on a unix socket only the platform reaches. */
  async startServer(
    deployment: Deployment,
    revisionId: string,
    project: { artifactDir: string; projectDir: string; configFile: string },
    secrets: Array<{ name: string; value: string }>,
    log: RevisionLog,
  ): Promise<AgentProcess> {
    const ident = await this.identity(deployment);
    const stateDir = this.layout.stateDir(deployment.id);
    ownFolder(stateDir, ident.uid, this.isolated);
    const socketDir = path.join(socketRoot(), revisionId);
    fs.rmSync(socketDir, { recursive: true, force: true });
    fs.mkdirSync(socketRoot(), { recursive: true, mode: 0o711 });
    ownFolder(socketDir, ident.uid, this.isolated);
    const inside = { state: this.isolated ? STATE_INSIDE : stateDir, socket: path.join(this.isolated ? SOCKET_DIR_INSIDE : socketDir, SOCKET_NAME) };
    const { command, args } = this.runner({ projectDir: this.inside(project.projectDir), configFile: this.inside(project.configFile), socket: inside.socket, stateDir: inside.state, serverId: deployment.id });
    const env = this.agentEnv(deployment, revisionId, secrets, ident, inside.state);
    return AgentProcess.start(
      this.launcher,
      {
        id: `dep-${revisionId}`,
        uid: ident.uid,
        limits: limitsFor(resourceSpecOf(deployment)),
        plan: withExtraBinds(servePlan({ layout: this.layout, artifactDir: project.artifactDir, projectDir: project.projectDir, stateDir, socketDir }), this.runnerBinds),
        argv: [command, ...args],
        env,
        cwd: this.inside(project.projectDir),
      },
      path.join(socketDir, SOCKET_NAME),
      log,
    );
  }

  /**
   * The agent server's whole environment: the deployment's secrets and its own identifiers and key.
   * Nothing of the platform's (no WHARF_HOME, DATABASE_URL, master key, host variables).
   */
  agentEnv(deployment: Deployment, revisionId: string, secrets: Array<{ name: string; value: string }>, ident: DeploymentIdentity, stateDir: string): Record<string, string> {
    const env: Record<string, string> = { PATH: "/usr/bin:/bin", LANG: process.env.LANG ?? "C.UTF-8" };
    if (process.env.TZ) env.TZ = process.env.TZ;
    for (const s of secrets) env[s.name] = s.value;
    const level = this.ctx.config.logLevel;
    Object.assign(env, {
      NODE_ENV: "production",
      HOME: stateDir,
      WHARF_LOG_LEVEL: level === "debug" || level === "trace" ? "info" : level,
      WHARF_DEPLOYMENT_ID: deployment.id,
      WHARF_REVISION_ID: revisionId,
      WHARF_WORKSPACE_ID: deployment.workspace_id,
      WHARF_MASTER_KEY: ident.agentKey,
    });
    return env;
  }

  /** Kills what a dead platform process left of a revision's server (its cgroup). */
  async killLeftover(revisionId: string): Promise<void> {
    await this.launcher.killLeftover(`dep-${revisionId}`);
    await this.launcher.killLeftover(`dep-build-${revisionId}`);
  }

  /** Removes a deleted deployment's private state (its database) and npm cache. */
  removeState(deploymentId: string): void {
    fs.rmSync(this.layout.stateDir(deploymentId), { recursive: true, force: true });
    fs.rmSync(this.layout.npmCacheFor(deploymentId), { recursive: true, force: true });
  }

  removeSocket(revisionId: string): void {
    fs.rmSync(path.join(socketRoot(), revisionId), { recursive: true, force: true });
  }
}

function withExtraBinds(plan: MountPlan, extra: string[]): MountPlan {
  return { ...plan, binds: [...plan.binds, ...extra.map((src) => ({ src }))] };
}

function resourceSpecOf(deployment: Deployment): Record<string, unknown> | null {
  try {
    return ((JSON.parse(deployment.source_config) as { resource_spec?: Record<string, unknown> | null }).resource_spec ?? null) || null;
  } catch {
    return null;
  }
}
