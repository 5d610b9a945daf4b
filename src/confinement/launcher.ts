import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import type { Readable } from "node:stream";
import type { Limits } from "./cgroups.ts";
import { killConfined, prepareConfinement, startConfined } from "./service.ts";
import type { CapturedNetwork } from "./network.ts";
import type { MountPlan } from "./mount-plan.ts";

/** One process (tree) of a deployment: an agent server or a build step. */
export interface Launched {
  pid: number | undefined;
  stdout: Readable;
  stderr: Readable;
  exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL of everything it started after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

export interface LaunchSpec {
  /** Unique per running process: names its cgroup (`dep-…`). */
  id: string;
  uid: number;
  limits: Limits;
  plan: MountPlan;
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  capture?: { tcpPorts: number[]; dns: boolean } | null;
  onNetwork?: (netnsPid: number, captured: CapturedNetwork | null) => Promise<void>;
}

/**
 * Starts deployment processes confined (the default wherever the sandbox driver's building blocks
 * work: root, bubblewrap, cgroups) or, with isolation off (development on a machine without them),
 * as plain children with the same scrubbed environment.
 */
export class Launcher {
  constructor(readonly opts: { isolation: boolean; scratchRoot: string; baseCacheDir: string }) {}

  get isolated(): boolean {
    return this.opts.isolation;
  }

  async launch(spec: LaunchSpec): Promise<Launched> {
    if (!this.opts.isolation) return this.plain(spec);
    const p = await startConfined({
      id: spec.id,
      hostUid: spec.uid,
      limits: spec.limits,
      binds: spec.plan.binds,
      symlinks: spec.plan.symlinks,
      overlays: spec.plan.overlays,
      disk: spec.plan.disk,
      env: spec.env,
      cwd: spec.cwd,
      argv: spec.argv,
      scratchDir: path.join(this.opts.scratchRoot, spec.id),
      baseCacheDir: this.opts.baseCacheDir,
      capture: spec.capture,
      onNetwork: spec.onNetwork,
      hostname: "deployment",
    });
    return { pid: p.child.pid, stdout: p.stdout, stderr: p.stderr, exited: p.exited, stop: p.stop };
  }

  /**
   * What the confinement's base image has at `insidePath` (a bind can cover only what exists: the
   * base's `/usr` and `/etc` are read-only, nothing new can be created there). Links count as absent.
   */
  baseHas(insidePath: string): "file" | "dir" | null {
    if (!this.opts.isolation) return null;
    const { baseDir } = prepareConfinement(this.opts.baseCacheDir, this.opts.scratchRoot);
    try {
      const st = fs.lstatSync(path.join(baseDir, insidePath));
      return st.isFile() ? "file" : st.isDirectory() ? "dir" : null;
    } catch {
      return null;
    }
  }

  /** Kills whatever is left of a process a previous platform process started (by its cgroup). */
  async killLeftover(id: string): Promise<void> {
    // Best effort: nothing left over is the usual case, and the next start kills by cgroup again.
    if (this.opts.isolation) await killConfined(id).catch(() => undefined);
  }

  private plain(spec: LaunchSpec): Launched {
    // Without confinement, inside-paths do not exist: the same folders are used at their host paths.
    const child = spawn(spec.argv[0], spec.argv.slice(1), {
      cwd: spec.cwd,
      env: spec.env,
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
    });
    let exitCode: number | null | undefined;
    const exited = new Promise<number | null>((resolve) => {
      child.once("error", () => resolve((exitCode = null)));
      child.once("exit", (code, signal) => resolve((exitCode = signal ? null : code)));
    });
    const group = (sig: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, sig);
      } catch {
        /* already gone */
      }
    };
    return {
      pid: child.pid,
      stdout: child.stdout!,
      stderr: child.stderr!,
      exited,
      stop: async (graceMs = 5000) => {
        if (exitCode === undefined && child.pid) {
          group("SIGTERM");
          const t = setTimeout(() => group("SIGKILL"), graceMs);
          await exited;
          clearTimeout(t);
        }
        if (child.pid) group("SIGKILL");
      },
    };
  }
}

/** Makes a folder the deployment's own (its uid, mode 0700), creating it if needed. */
export function ownFolder(dir: string, uid: number, isolation: boolean): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (isolation) fs.chownSync(dir, uid, uid);
  fs.chmodSync(dir, 0o700);
}
