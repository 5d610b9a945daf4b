import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import { WHARF_BIN } from "./layout.ts";
import type { RevisionLog } from "./revision-logs.ts";

export interface RunnerArgs {
  projectDir: string;
  configFile: string;
  host: string;
  port: number;
  /** Scopes the agent server's rows: the deployment id, so threads outlive revisions. */
  serverId: string;
}

/** How to start one agent server process; tests substitute a small fixture server. */
export type RunnerCommand = (args: RunnerArgs) => { command: string; args: string[] };

export const defaultRunnerCommand: RunnerCommand = (a) => ({
  command: process.execPath,
  args: [WHARF_BIN, "agent-server", "--project", a.projectDir, "--host", a.host, "--port", String(a.port), "--server-id", a.serverId],
});

export async function freePort(host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.unref();
    s.once("error", reject);
    s.listen(0, host, () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/**
 * One agent server process of one revision. It runs in its own process group so that stopping it
 * also stops whatever it started; its output goes to the revision's deploy log.
 */
export class AgentProcess {
  readonly child: ChildProcess;
  readonly exited: Promise<number | null>;
  private exitCode: number | null | undefined = undefined;

  constructor(
    runner: RunnerCommand,
    readonly args: RunnerArgs,
    env: NodeJS.ProcessEnv,
    log: RevisionLog,
  ) {
    const { command, args: argv } = runner(args);
    this.child = spawn(command, argv, { cwd: args.projectDir, env, stdio: ["ignore", "pipe", "pipe"], detached: true });
    this.child.stdout!.on("data", log.lineSink("info"));
    this.child.stderr!.on("data", log.lineSink("info"));
    this.exited = new Promise((resolve) => {
      this.child.once("error", (err) => {
        log.line(`cannot start the agent server: ${err.message}`, "error");
        this.exitCode = null;
        resolve(null);
      });
      this.child.once("exit", (code, signal) => {
        this.exitCode = signal ? null : code;
        resolve(this.exitCode);
      });
    });
  }

  get url(): string {
    return `http://${this.args.host.includes(":") ? `[${this.args.host}]` : this.args.host}:${this.args.port}`;
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.exitCode === undefined;
  }

  /** SIGTERM to the group, SIGKILL after `graceMs`. */
  async stop(graceMs = 5000): Promise<void> {
    if (!this.running || !this.child.pid) return;
    signalGroup(this.child.pid, "SIGTERM");
    const timer = setTimeout(() => signalGroup(this.child.pid!, "SIGKILL"), graceMs);
    await this.exited;
    clearTimeout(timer);
    signalGroup(this.child.pid, "SIGKILL"); // leftovers of the group
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    try {
      process.kill(pid, signal);
    } catch {
      /* gone */
    }
  }
}

/**
 * Kills an agent server left behind by a platform process that died (SIGKILL leaves children
 * running), but only if that pid still is our server for this id: pids are reused.
 */
export function killOrphan(pid: number, serverMarker: string): boolean {
  try {
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8");
    if (!cmdline.split("\0").includes(serverMarker)) return false;
  } catch {
    return false;
  }
  signalGroup(pid, "SIGKILL");
  return true;
}
