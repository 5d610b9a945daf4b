import fs from "node:fs";
import path from "node:path";
import type { Database } from "../../store/schema.ts";
import { AgentProcess, type RunnerCommand } from "./agent-process.ts";
import {
  insidePath,
  limitsFor,
  servePlan,
  SOCKET_DIR_INSIDE,
  SOCKET_NAME,
  socketRoot,
  STATE_INSIDE,
} from "../confinement/confinement.ts";
import { DeploymentsLayout } from "../layout.ts";
import { ownFolder, type LaunchSpec } from "../../confinement/index.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import { GATEWAY_PORT } from "./data-plane-gateway.ts";
import { prepareDatabaseAccess } from "./database-access.ts";
import { serverEgressId } from "../confinement/egress-plan.ts";
import { ensureStateImage } from "./state-disk.ts";
import { logEgressRefusals } from "./egress-refusals.ts";
import { agentEnv } from "./agent-env.ts";
import { deploymentIdentity } from "./deployment-identity.ts";
import { pythonEnvBinds, resourceSpecOf, unplacedNote, withExtraBinds } from "./launch-support.ts";
import { openGateway } from "./revision-gateway.ts";
import { inside, type RuntimeDeps } from "./runtime-deps.ts";

type Deployment = Database["deployments"];

/** What starting a revision's server needs beyond the runtime's shared parts. */
export interface ServerDeps extends RuntimeDeps {
  readonly runner: RunnerCommand;
  readonly runnerBinds: string[];
}

/** A revision's server to start: its deployment, revision, build, secrets and deploy log. */
export type ServerStartArgs = [
  deployment: Deployment,
  revisionId: string,
  project: { artifactDir: string; projectDir: string; configFile: string },
  secrets: Array<{ name: string; value: string }>,
  log: RevisionLog,
  opts?: { exclusive?: boolean },
];

export async function startRevisionServer(
  rt: ServerDeps,
  ...[deployment, revisionId, project, secrets, log, opts = {}]: ServerStartArgs
): Promise<AgentProcess> {
  const files = await prepareServerFiles(rt, deployment, revisionId, project, opts);
  const links = await openServerLinks(rt, deployment, revisionId, log);
  const { database, gateway, egress } = links;
  // Python projects: the workspace's environments, read-only, where their builds made them.
  const pythonEnvs = fs.existsSync(rt.layout.pythonEnvsFor(deployment.workspace_id))
    ? { envs: rt.layout.pythonEnvsFor(deployment.workspace_id), writable: false }
    : undefined;
  const env = {
    ...agentEnv(rt, deployment, revisionId, secrets, files.ident, files.insideDirs.state),
    ...(pythonEnvs && { WHARF_PYTHON_ENVS: inside(rt, pythonEnvs.envs) }),
    ...egress?.env,
    LANGSMITH_ENDPOINT: links.gatewayUrl,
    LANGSMITH_API_KEY: links.key,
    WHARF_URL: links.gatewayUrl,
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
    rt.launcher,
    serverLaunchSpec(rt, { deployment, revisionId, project, files, links, pythonEnvs, env }),
    path.join(files.socketDir, SOCKET_NAME),
    log,
    cleanup,
  );
}

/** The server's own folders (state, socket), given to its uid, and its command as it sees them. */
async function prepareServerFiles(
  rt: ServerDeps,
  deployment: Deployment,
  revisionId: string,
  project: ServerStartArgs[2],
  opts: NonNullable<ServerStartArgs[5]>,
) {
  const ident = await deploymentIdentity(rt.ctx, deployment);
  const stateDir = rt.layout.stateDir(deployment.id);
  ownFolder(stateDir, ident.uid, rt.isolated);
  // Confined, the state folder is a disk image of a hard size (mounting it takes root).
  const stateImage = rt.isolated
    ? await ensureStateImage(stateDir, ident.uid, rt.ctx.config.settings.WHARF_DEPLOYMENT_STATE_BYTES)
    : null;
  const socketDir = freshSocketDir(rt, revisionId, ident.uid);
  const insideDirs = {
    state: rt.isolated ? STATE_INSIDE : stateDir,
    socket: path.join(rt.isolated ? SOCKET_DIR_INSIDE : socketDir, SOCKET_NAME),
  };
  const buildLayout = layoutOf(rt, project.artifactDir);
  const { command, args } = rt.runner({
    projectDir: inside(rt, project.projectDir, buildLayout),
    configFile: inside(rt, project.configFile, buildLayout),
    socket: insideDirs.socket,
    stateDir: insideDirs.state,
    serverId: deployment.id,
    exclusive: opts.exclusive,
  });
  return { ident, stateDir, stateImage, socketDir, insideDirs, buildLayout, argv: [command, ...args] };
}

type ServerFiles = Awaited<ReturnType<typeof prepareServerFiles>>;

/** The server's ways in and out: its database, its data-plane gateway and its egress. */
async function openServerLinks(rt: RuntimeDeps, deployment: Deployment, revisionId: string, log: RevisionLog) {
  // On PostgreSQL: the deployment's own role and schema, through a forwarder in its namespace.
  const database = await prepareDatabaseAccess(rt.ctx, deployment, rt.isolated);
  // The data plane, through a gateway that only this revision's fresh key opens.
  const { gateway, key, gatewayUrl } = await openGateway(rt, deployment, revisionId);
  // The way out: the egress proxy under the deployment's proxy_config (confined only).
  const egress = await openServerEgress(rt, deployment, revisionId, log).catch((err) => {
    database?.close();
    gateway.close();
    throw err;
  });
  return { database, gateway, key, gatewayUrl, egress };
}

type ServerLinks = Awaited<ReturnType<typeof openServerLinks>>;

/** How the launcher starts the server: its mount plan, command, environment and captured ports. */
function serverLaunchSpec(
  rt: ServerDeps,
  s: {
    deployment: Deployment;
    revisionId: string;
    project: ServerStartArgs[2];
    files: ServerFiles;
    links: ServerLinks;
    pythonEnvs: { envs: string; writable: boolean } | undefined;
    env: Record<string, string>;
  },
): LaunchSpec {
  const { deployment, project, files, links } = s;
  const { database, egress } = links;
  return {
    id: `dep-${s.revisionId}`,
    uid: files.ident.uid,
    limits: limitsFor(resourceSpecOf(deployment)),
    plan: withExtraBinds(
      servePlan({
        layout: files.buildLayout,
        workspaceId: deployment.workspace_id,
        artifactDir: project.artifactDir,
        projectDir: project.projectDir,
        stateDir: files.stateDir,
        stateImage: files.stateImage,
        socketDir: files.socketDir,
      }),
      rt.runnerBinds.map((src) => ({ src, dest: insidePath(files.buildLayout, src), copy: true })),
      [...pythonEnvBinds(rt.layout, deployment.workspace_id, s.pythonEnvs), ...(egress?.binds ?? [])],
    ),
    argv: files.argv.map((a) => inside(rt, a, files.buildLayout)),
    env: s.env,
    cwd: inside(rt, project.projectDir, files.buildLayout),
    capture: rt.isolated
      ? {
          tcpPorts: [GATEWAY_PORT, ...(database?.tcpPorts ?? []), ...(egress?.capture.tcpPorts ?? [])],
          dns: egress?.capture.dns ?? false,
        }
      : null,
    onNetwork: attachNetwork(links),
  };
}

/** Hands the listeners captured in the server's namespace to its gateway, database and egress. */
function attachNetwork({ gateway, database, egress }: ServerLinks): NonNullable<LaunchSpec["onNetwork"]> {
  return async (pid, captured) => {
    const listener = captured?.tcp.get(GATEWAY_PORT);
    if (!listener)
      throw new Error(`no data-plane listener in the namespace: ${captured?.errors.join("; ") || "none handed over"}`);
    gateway.attach(listener);
    database?.attach(captured);
    await egress?.attach(pid, captured);
  };
}

async function openServerEgress(rt: RuntimeDeps, deployment: Deployment, revisionId: string, log: RevisionLog) {
  if (!rt.isolated) return null;
  return rt.egress.open({
    id: serverEgressId(revisionId),
    deploymentId: deployment.id,
    workspaceId: deployment.workspace_id,
    registries: null,
    onUnplaced: unplacedNote(log),
  });
}

/** The revision's socket folder, emptied and given to its uid. */
function freshSocketDir(rt: RuntimeDeps, revisionId: string, uid: number): string {
  const socketDir = path.join(socketRoot(), revisionId);
  fs.rmSync(socketDir, { recursive: true, force: true });
  fs.mkdirSync(socketRoot(), { recursive: true, mode: 0o711 });
  ownFolder(socketDir, uid, rt.isolated);
  return socketDir;
}

/**
 * The layout a build belongs to: ours, or (another platform process built it and died, on the
 * same machine) that process's, so its resolution links are the ones shown.
 */
function layoutOf(rt: RuntimeDeps, artifactDir: string): DeploymentsLayout {
  if (artifactDir.startsWith(rt.layout.builds + path.sep)) return rt.layout;
  return new DeploymentsLayout(path.dirname(path.dirname(path.dirname(artifactDir))));
}
