import fs from "node:fs";
import { killGroupsAndProcesses, type Launched, type Launcher, type LaunchSpec } from "../../confinement/index.ts";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { RevisionLog } from "../store/revision-logs.ts";

/** tsx's loader, by absolute URL, so that it resolves whatever the child's working folder is. */
export const TSX_LOADER = import.meta.resolve("tsx");
export const REVISION_SERVER = path.join(path.dirname(fileURLToPath(import.meta.url)), "revision-server.ts");

export interface RunnerArgs {
  projectDir: string;
  configFile: string;
  /** Unix socket to listen on (as the process sees it). */
  socket: string;
  /** The private state folder (as the process sees it): the deployment's database lives here. */
  stateDir: string;
  /** Scopes the agent server's rows: the deployment id, so threads outlive revisions. */
  serverId: string;
  /** No other process serves this deployment's storage: runs left running are settled at start. */
  exclusive?: boolean;
}

/** How to start one agent server process; tests substitute a small fixture server. */
export type RunnerCommand = (args: RunnerArgs) => { command: string; args: string[] };

export const defaultRunnerCommand: RunnerCommand = (a) => ({
  command: process.execPath,
  args: [
    "--import",
    TSX_LOADER,
    REVISION_SERVER,
    "--project",
    a.projectDir,
    "--socket",
    a.socket,
    "--state",
    a.stateDir,
    "--server-id",
    a.serverId,
    ...(a.exclusive ? ["--exclusive"] : []),
  ],
});

/**
 * One agent server process of one revision, confined by the launcher, reachable at a unix socket
 * (the host's path to it is `socketPath`); its output goes to the revision's deploy log.
 */
export class AgentProcess {
  readonly exited: Promise<number | null>;
  private exitCode: number | null | undefined = undefined;

  private constructor(
    private readonly launched: Launched,
    readonly socketPath: string,
    readonly cgroupId: string,
    private readonly cleanup: () => void,
  ) {
    this.exited = launched.exited.then((code) => (this.exitCode = code));
  }

  static async start(
    launcher: Launcher,
    spec: LaunchSpec,
    socketPath: string,
    log: RevisionLog,
    cleanup: () => void = () => undefined,
  ): Promise<AgentProcess> {
    let launched: Launched;
    try {
      launched = await launcher.launch(spec);
    } catch (err) {
      cleanup();
      throw err;
    }
    launched.stdout.on("data", log.lineSink("info"));
    launched.stderr.on("data", log.lineSink("info"));
    const proc = new AgentProcess(launched, socketPath, spec.id, cleanup);
    // Whatever ends it (a crash included), its credential and gateway end with it.
    void proc.exited.then(cleanup);
    return proc;
  }

  /** What the proxy and other platform processes connect to. */
  get url(): string {
    return `unix:${this.socketPath}`;
  }

  get pid(): number | undefined {
    return this.launched.pid;
  }

  get running(): boolean {
    return this.exitCode === undefined;
  }

  async stop(graceMs = 5000): Promise<void> {
    await this.launched.stop(graceMs);
    this.cleanup();
  }
}

/** The unix socket path in a `unix:/path` serving URL, or null for an http URL. */
export function socketOf(url: string): string | null {
  return url.startsWith("unix:") ? url.slice(5) : null;
}

/**
 * Kills an unconfined agent server left behind by a platform process that died (SIGKILL leaves
 * children running), but only if that pid still is our server for this id: pids are reused.
 * Confined servers die with the platform (`--die-with-parent`) and their cgroup is emptied.
 */
export function killOrphan(pid: number, serverMarker: string): boolean {
  try {
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
    if (!cmdline.split("\0").includes(serverMarker)) return false;
  } catch {
    return false;
  }
  killGroupsAndProcesses([pid]);
  return true;
}
