import crypto from "node:crypto";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import type { PlatformContext } from "../../platform/context.ts";
import type { Database } from "../../store/schema.ts";
import { AgentProcess, type RunnerCommand } from "./agent-process.ts";
import type { BuildStep } from "../build/builder.ts";
import {
  buildLimits,
  buildPlan,
  insidePath,
  type Bind,
  type MountPlan,
  DEPLOYMENT_UID_BASE,
  limitsFor,
  servePlan,
  SOCKET_DIR_INSIDE,
  SOCKET_NAME,
  socketRoot,
  STATE_INSIDE,
} from "../confinement/confinement.ts";
import { DeploymentsLayout } from "../layout.ts";
import { ownFolder, type Launched, type Launcher } from "../../confinement/index.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import net from "node:net";
import {
  DataPlaneGateway,
  deleteLabelledSandboxes,
  DEPLOYMENT_LABEL,
  deploymentUser,
  GATEWAY_PORT,
  GATEWAY_URL,
  newGatewayKey,
  REVISION_LABEL,
} from "./data-plane-gateway.ts";
import { CommandFailed } from "../build/run-command.ts";
import { prepareDatabaseAccess } from "./database-access.ts";
import type { StoredProxyConfig } from "../../egress/index.ts";
import { buildRegistryPlan, type BuildRegistryPlan } from "../build/registry-hosts.ts";
import { readHostRegistries, type HostRegistries } from "../build/host-registries.ts";
import { readProjectFile } from "../build/project-file.ts";
import { buildEgressId, serverEgressId } from "../confinement/egress-plan.ts";
import { ensureStateImage } from "./state-disk.ts";
import { DeploymentEgress, type ProcessEgress } from "./revision-egress.ts";
import { serverTimeouts } from "../../http/connection-guard.ts";
import { BuildRefusals, logEgressRefusals } from "./egress-refusals.ts";
import { hostVariable } from "../../config/index.ts";

type Deployment = Database["deployments"];

/** What a deployment's processes run as and seal with. */
export interface DeploymentIdentity {
  uid: number;
  /** The deployment's own agent-server key (base64), its agent server's WHARF_MASTER_KEY. */
  agentKey: string;
}

export const agentKeyAad = (workspaceId: string, deploymentId: string) =>
  `deployment-agent-key:${workspaceId}:${deploymentId}`;

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
    /** The environment the host's npm and pip are asked in (default: the platform's own). */
    private readonly packageManagerEnv?: NodeJS.ProcessEnv,
  ) {
    this.egress = new DeploymentEgress(ctx.db, path.join(layout.root, "egress"), (p) => launcher.baseHas(p), ctx.log);
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
  async identity(deployment: Deployment): Promise<DeploymentIdentity> {
    const db = this.ctx.db;
    let row = deployment;
    for (let attempt = 0; row.run_uid === null && attempt < 20; attempt++) {
      const max = await db
        .selectFrom("deployments")
        .select((eb) => eb.fn.max("run_uid").as("m"))
        .executeTakeFirst();
      const uid = Math.max(DEPLOYMENT_UID_BASE, Number(max?.m ?? 0) + 1);
      try {
        await db
          .updateTable("deployments")
          .set({ run_uid: uid })
          .where("id", "=", row.id)
          .where("run_uid", "is", null)
          .execute();
      } catch {
        // Another process took that uid for another deployment at the same moment: try the next.
      }
      row = (await db.selectFrom("deployments").selectAll().where("id", "=", row.id).executeTakeFirst()) ?? row;
    }
    const uid = row.run_uid;
    if (uid === null) throw new Error("could not allocate a uid for the deployment");
    if (!row.agent_key_ciphertext) {
      const sealed = this.ctx.box.seal(
        crypto.randomBytes(32).toString("base64"),
        agentKeyAad(row.workspace_id, row.id),
      );
      await db
        .updateTable("deployments")
        .set({ agent_key_key_id: sealed.keyId, agent_key_ciphertext: sealed.blob })
        .where("id", "=", row.id)
        .where("agent_key_ciphertext", "is", null)
        .execute();
      row = (await db.selectFrom("deployments").selectAll().where("id", "=", row.id).executeTakeFirst()) ?? row;
    }
    const agentKey = this.ctx.box.open(
      { keyId: row.agent_key_key_id!, blob: row.agent_key_ciphertext! },
      agentKeyAad(row.workspace_id, row.id),
    );
    return { uid, agentKey };
  }

  /** A host path as the confined process sees it (unchanged without isolation). */
  private inside(p: string, layout = this.layout): string {
    return this.isolated ? insidePath(layout, p) : p;
  }

  /**
   * The layout a build belongs to: ours, or (another platform process built it and died, on the
   * same machine) that process's, so its resolution links are the ones shown.
   */
  private layoutOf(artifactDir: string): DeploymentsLayout {
    if (artifactDir.startsWith(this.layout.builds + path.sep)) return this.layout;
    return new DeploymentsLayout(path.dirname(path.dirname(path.dirname(artifactDir))));
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
    const limits = buildLimits(limitsFor(resourceSpecOf(deployment)));
    const npmCache = this.layout.npmCacheFor(deployment.id);
    return (step) =>
      this.track(deployment.id, async () => {
        signal.throwIfAborted();
        ownFolder(npmCache, ident.uid, this.isolated);
        const artifactDir = this.layout.buildDir(revisionId);
        // The project's own file, read on the host: never followed, never blocking, capped.
        const npmrc = readProjectFile(artifactDir, path.relative(artifactDir, path.join(step.cwd, ".npmrc")));
        const plan = buildRegistryPlan({
          npmrc,
          env: step.env,
          host: await this.hostRegistries(),
          python: !!step.python,
          allowInternal: this.ctx.config.settings.WHARF_BUILD_REGISTRIES_INTERNAL,
        });
        // The project's own indexes, git hosts and uv.lock sources (Python), beside the registries.
        const registries = step.python?.hosts?.length
          ? [...new Set([...plan.allow, ...step.python.hosts])]
          : plan.allow;
        if (step.python?.writable) ownFolder(step.python.envs, ident.uid, this.isolated);
        const egress = this.isolated
          ? await this.egress.open({
              id: buildEgressId(revisionId),
              deploymentId: deployment.id,
              workspaceId: deployment.workspace_id,
              registries: { allow: registries, trust: { internalHosts: plan.internal, upstreamCaFiles: plan.caFiles } },
              onUnplaced: unplacedNote(log),
            })
          : null;
        const env: Record<string, string> = {
          PATH: "/usr/bin:/bin",
          HOME: this.isolated ? "/tmp" : npmCache,
          LANG: hostVariable("LANG") ?? "C.UTF-8",
          npm_config_cache: this.isolated ? "/npm-cache" : npmCache,
          ...plan.env,
          ...step.env,
          ...egress?.env,
        };
        let launched: Launched;
        try {
          const plan = buildPlan({
            layout: this.layout,
            workspaceId: deployment.workspace_id,
            artifactDir,
            projectDir: step.cwd,
            npmCache,
            writable: step.writable,
          });
          launched = await this.launcher.launch({
            id: buildEgressId(revisionId),
            uid: ident.uid,
            limits,
            plan: {
              ...plan,
              binds: [
                ...plan.binds,
                ...pythonEnvBinds(this.layout, deployment.workspace_id, step.python),
                ...(egress?.binds ?? []),
              ],
            },
            argv: step.argv.map((a) => this.inside(a)),
            env,
            cwd: this.inside(step.cwd),
            capture: egress?.capture ?? null,
            onNetwork: egress ? (pid, captured) => egress.attach(pid, captured) : undefined,
          });
        } catch (err) {
          await egress?.close();
          throw err;
        }
        return this.awaitBuildStep(launched, step, revisionId, log, signal, egress, plan.hostEntries);
      });
  }

  /** Waits for a launched build step (killed on interrupt); its captured output, or CommandFailed. */
  private async awaitBuildStep(
    launched: Launched,
    step: Parameters<BuildStep>[0],
    revisionId: string,
    log: RevisionLog,
    signal: AbortSignal,
    egress: ProcessEgress | null,
    hostRegistries: BuildRegistryPlan["hostEntries"],
  ): Promise<string> {
    let captured = "";
    launched.stdout.on("data", step.capture ? (d: Buffer) => (captured += d.toString()) : log.lineSink("info"));
    launched.stderr.on("data", log.lineSink("info"));
    const kill = () => void launched.stop(0);
    // An interrupt that arrived while the confinement was starting has already fired its event.
    if (signal.aborted) kill();
    else signal.addEventListener("abort", kill, { once: true });
    const refusals = egress ? new BuildRefusals(buildEgressId(revisionId), log, kill, { hostRegistries }) : null;
    try {
      const code = await launched.exited;
      await launched.stop(0);
      signal.throwIfAborted();
      if (code !== 0)
        throw new CommandFailed(refusals?.failure(step.what) ?? `${step.what} failed (exit ${code ?? "signal"})`);
      return captured;
    } finally {
      refusals?.close();
      signal.removeEventListener("abort", kill);
      await egress?.close();
    }
  }

  /**
   * Starts a revision's agent server; it listens on a unix socket only the platform reaches. Never
   * for a deployment being deleted: a start racing the deletion stops again before `purge` removes
   * the state folder, so the folder cannot come back.
   */
  startServer(...a: Parameters<RevisionRuntime["startServerNow"]>): Promise<AgentProcess> {
    const deploymentId = a[0].id;
    return this.track(deploymentId, async () => {
      const proc = await this.startServerNow(...a);
      if (this.deleted.has(deploymentId)) {
        await proc.stop(0);
        throw new Error("the deployment is being deleted");
      }
      return proc;
    });
  }

  private async startServerNow(
    deployment: Deployment,
    revisionId: string,
    project: { artifactDir: string; projectDir: string; configFile: string },
    secrets: Array<{ name: string; value: string }>,
    log: RevisionLog,
    opts: { exclusive?: boolean } = {},
  ): Promise<AgentProcess> {
    const ident = await this.identity(deployment);
    const stateDir = this.layout.stateDir(deployment.id);
    ownFolder(stateDir, ident.uid, this.isolated);
    // Confined, the state folder is a disk image of a hard size (mounting it takes root).
    const stateImage = this.isolated
      ? await ensureStateImage(stateDir, ident.uid, this.ctx.config.settings.WHARF_DEPLOYMENT_STATE_BYTES)
      : null;
    const socketDir = this.freshSocketDir(revisionId, ident.uid);
    const inside = {
      state: this.isolated ? STATE_INSIDE : stateDir,
      socket: path.join(this.isolated ? SOCKET_DIR_INSIDE : socketDir, SOCKET_NAME),
    };
    const buildLayout = this.layoutOf(project.artifactDir);
    const { command, args } = this.runner({
      projectDir: this.inside(project.projectDir, buildLayout),
      configFile: this.inside(project.configFile, buildLayout),
      socket: inside.socket,
      stateDir: inside.state,
      serverId: deployment.id,
      exclusive: opts.exclusive,
    });
    // On PostgreSQL: the deployment's own role and schema, through a forwarder in its namespace.
    const database = await prepareDatabaseAccess(this.ctx, deployment, this.isolated);
    // The data plane, through a gateway that only this revision's fresh key opens.
    const { gateway, key, gatewayUrl } = await this.openGateway(deployment, revisionId);
    // The way out: the egress proxy under the deployment's proxy_config (confined only).
    const egress = await this.openServerEgress(deployment, revisionId, log).catch((err) => {
      database?.close();
      gateway.close();
      throw err;
    });
    // Python projects: the workspace's environments, read-only, where their builds made them.
    const pythonEnvs = fs.existsSync(this.layout.pythonEnvsFor(deployment.workspace_id))
      ? { envs: this.layout.pythonEnvsFor(deployment.workspace_id), writable: false }
      : undefined;
    const env = {
      ...this.agentEnv(deployment, revisionId, secrets, ident, inside.state),
      ...(pythonEnvs && { WHARF_PYTHON_ENVS: this.inside(pythonEnvs.envs) }),
      ...egress?.env,
      LANGSMITH_ENDPOINT: gatewayUrl,
      LANGSMITH_API_KEY: key,
      WHARF_URL: gatewayUrl,
      ...database?.env,
    };
    // The agent server's refused requests go into its deploy log (it keeps serving).
    const unwatchRefusals = egress ? logEgressRefusals(serverEgressId(revisionId), log, "warning") : null;
    const cleanup = () => {
      unwatchRefusals?.();
      database?.close();
      gateway.close();
      void egress?.close();
    };
    return AgentProcess.start(
      this.launcher,
      {
        id: `dep-${revisionId}`,
        uid: ident.uid,
        limits: limitsFor(resourceSpecOf(deployment)),
        plan: withExtraBinds(
          servePlan({
            layout: buildLayout,
            workspaceId: deployment.workspace_id,
            artifactDir: project.artifactDir,
            projectDir: project.projectDir,
            stateDir,
            stateImage,
            socketDir,
          }),
          this.runnerBinds.map((src) => ({ src, dest: insidePath(buildLayout, src), copy: true })),
          [...pythonEnvBinds(this.layout, deployment.workspace_id, pythonEnvs), ...(egress?.binds ?? [])],
        ),
        argv: [command, ...args].map((a) => this.inside(a, buildLayout)),
        env,
        cwd: this.inside(project.projectDir, buildLayout),
        capture: this.isolated
          ? {
              tcpPorts: [GATEWAY_PORT, ...(database?.tcpPorts ?? []), ...(egress?.capture.tcpPorts ?? [])],
              dns: egress?.capture.dns ?? false,
            }
          : null,
        onNetwork: async (pid, captured) => {
          const listener = captured?.tcp.get(GATEWAY_PORT);
          if (!listener)
            throw new Error(
              `no data-plane listener in the namespace: ${captured?.errors.join("; ") || "none handed over"}`,
            );
          gateway.attach(listener);
          database?.attach(captured);
          await egress?.attach(pid, captured);
        },
      },
      path.join(socketDir, SOCKET_NAME),
      log,
      cleanup,
    );
  }

  private async openServerEgress(deployment: Deployment, revisionId: string, log: RevisionLog) {
    if (!this.isolated) return null;
    return this.egress.open({
      id: serverEgressId(revisionId),
      deploymentId: deployment.id,
      workspaceId: deployment.workspace_id,
      registries: null,
      onUnplaced: unplacedNote(log),
    });
  }

  /** The revision's socket folder, emptied and given to its uid. */
  private freshSocketDir(revisionId: string, uid: number): string {
    const socketDir = path.join(socketRoot(), revisionId);
    fs.rmSync(socketDir, { recursive: true, force: true });
    fs.mkdirSync(socketRoot(), { recursive: true, mode: 0o711 });
    ownFolder(socketDir, uid, this.isolated);
    return socketDir;
  }

  /** The revision's data-plane gateway, opened by its fresh key alone (on a loopback port when unconfined). */
  private async openGateway(deployment: Deployment, revisionId: string) {
    const userId = await deploymentUser(this.ctx.db, deployment.api_key_id);
    if (!userId) throw new Error("the deployment's owner is gone");
    const key = newGatewayKey();
    const gateway = new DataPlaneGateway(
      { deploymentId: deployment.id, revisionId, workspaceId: deployment.workspace_id, userId, key },
      {
        baseUrl: () => this.ctx.baseUrl(),
        box: this.ctx.box,
        limits: {
          maxConnections: this.ctx.config.settings.WHARF_MAX_CONNECTIONS_PER_CLIENT,
          timeouts: serverTimeouts(this.ctx.config.settings),
        },
      },
    );
    let gatewayUrl = GATEWAY_URL;
    if (!this.isolated) {
      // No network namespace: the gateway listens on a loopback port of the host instead.
      const l = net.createServer();
      await new Promise<void>((resolve, reject) => l.once("error", reject).listen(0, "127.0.0.1", () => resolve()));
      gateway.attach(l);
      gatewayUrl = `http://127.0.0.1:${(l.address() as net.AddressInfo).port}`;
    }
    return { gateway, key, gatewayUrl };
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
    const env: Record<string, string> = { PATH: "/usr/bin:/bin", LANG: hostVariable("LANG") ?? "C.UTF-8" };
    const tz = hostVariable("TZ");
    if (tz) env.TZ = tz;
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
    // Runs' webhooks: confined, every connection already meets the egress proxy's address policy;
    // unconfined, the server checks them against the same policy with the operator's settings.
    const s = this.ctx.config.settings;
    if (this.isolated) env.WHARF_AGENT_EGRESS_PROXIED = "1";
    else
      Object.assign(env, {
        WHARF_EGRESS_ALLOW_INTERNAL: s.WHARF_EGRESS_ALLOW_INTERNAL.join(","),
        WHARF_EGRESS_HOSTS: s.WHARF_EGRESS_HOSTS,
        WHARF_EGRESS_SYSTEM_DNS: s.WHARF_EGRESS_SYSTEM_DNS ? "1" : "0",
      });
    return env;
  }

  /** Deletes the sandboxes a revision (or, without one, the whole deployment) created. */
  async deleteSandboxes(
    deployment: { id: string; workspace_id: string; api_key_id: string },
    revisionId: string | null,
    log?: RevisionLog,
  ): Promise<void> {
    try {
      const userId = await deploymentUser(this.ctx.db, deployment.api_key_id);
      if (!userId) return;
      const n = await deleteLabelledSandboxes(
        { baseUrl: () => this.ctx.baseUrl(), box: this.ctx.box },
        { userId, workspaceId: deployment.workspace_id },
        revisionId ? REVISION_LABEL : DEPLOYMENT_LABEL,
        revisionId ?? deployment.id,
      );
      if (n) log?.line(`deleted ${n} sandbox(es) this revision created`);
    } catch (err) {
      this.ctx.log.warn(
        { err, deployment: deployment.id, revision: revisionId },
        "could not delete the sandboxes of a deployment (their TTL will)",
      );
    }
  }

  /** Kills what a dead platform process left of a revision's server (its cgroup). */
  async killLeftover(revisionId: string): Promise<void> {
    await this.launcher.killLeftover(`dep-${revisionId}`);
    await this.launcher.killLeftover(`dep-build-${revisionId}`);
    // Their egress files (a process killed with the platform never removed them).
    for (const id of [serverEgressId(revisionId), buildEgressId(revisionId)])
      fs.rmSync(path.join(this.layout.root, "egress", id), { recursive: true, force: true });
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

function withExtraBinds(plan: MountPlan, extra: Bind[], egress: Bind[] = []): MountPlan {
  return { ...plan, binds: [...plan.binds, ...extra, ...egress] };
}

/**
 * The workspace's Python environments (or a build's staging folder for them) shown at the inside
 * path of `deps/<workspace>/python`, so a venv made there works where the agent server uses it.
 */
function pythonEnvBinds(
  layout: DeploymentsLayout,
  workspaceId: string,
  python: { envs: string; writable: boolean } | undefined,
): Bind[] {
  if (!python) return [];
  return [
    {
      src: python.envs,
      dest: insidePath(layout, layout.pythonEnvsFor(workspaceId)),
      rw: python.writable,
      beneath: layout.deps,
    },
  ];
}

/** Egress files that cannot appear in the confinement (a new file under read-only `/etc`), told in the log. */
const unplacedNote = (log: RevisionLog) => (paths: string[]) =>
  log.line(
    `egress: ${paths.join(", ")} cannot be shown in the confinement (no such folder in its read-only tree)`,
    "warning",
  );

function resourceSpecOf(deployment: Deployment): Record<string, unknown> | null {
  try {
    return (
      ((JSON.parse(deployment.source_config) as { resource_spec?: Record<string, unknown> | null }).resource_spec ??
        null) ||
      null
    );
  } catch {
    return null;
  }
}
