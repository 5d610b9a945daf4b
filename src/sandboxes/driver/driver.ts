import type net from "node:net";
import type { Readable, Writable } from "node:stream";
import type { CapturedNetwork } from "../../confinement/index.ts";
export type { CapturedNetwork };

/**
 * What the sandboxes API needs from whatever runs sandboxes. The local driver (bubblewrap and
 * namespaces on this host) implements it; a Kubernetes driver (a pod per sandbox, the egress proxy
 * as a sidecar, exec through the pod's agent) can implement the same interface without any change
 * to the API, the data plane or the lifecycle code.
 */
export interface SandboxSpec {
  id: string;
  workspaceId: string;
  cpuMillicores: number;
  memBytes: number;
  fsCapacityBytes: number;
  /** A snapshot archive to unpack into the sandbox's writable layer on first start. */
  snapshotArchive: string | null;
  /** The read-only filesystem under the writable layer (an image's); the driver's base when absent. */
  lowerDir?: string;
  /**
   * Capture for the egress proxy, set up by the driver while it creates the namespace: every
   * destination routed to the namespace's loopback, and listeners for these TCP ports (and DNS)
   * opened inside it, handed to `onNetwork`.
   */
  capture?: { tcpPorts: number[]; dns: boolean } | null;
}

/** Driver-specific facts about a running sandbox, stored (as JSON) so a restarted platform can re-adopt it. */
export type RuntimeRef = Record<string, unknown>;

export interface StartHooks {
  /**
   * Runs once the sandbox's network namespace exists and before anything runs in it (egress
   * attach). `captured`: the listeners `spec.capture` asked for, now the hook's to own and close.
   */
  onNetwork?(netnsPid: number, captured: CapturedNetwork | null): Promise<void>;
}

export interface ExecRequest {
  argv: string[];
  env: Record<string, string>;
  cwd: string;
  /** Run on a pseudo-terminal of this size (stdout carries everything; stderr stays empty). */
  tty?: { rows: number; cols: number };
}

export interface ExecProcess {
  /** The command's pid inside the sandbox (best effort; 0 when unknown). */
  pid(): Promise<number>;
  stdin: Writable;
  stdout: Readable;
  stderr: Readable;
  /** Resolves with the exit code (128 + signal number when killed by a signal). */
  exited: Promise<number>;
  /** Resizes the command's terminal (commands started with `tty` only). */
  resize?(rows: number, cols: number): void;
  /** Kills the command's whole process group. */
  kill(): void;
}

export interface SandboxDriver {
  readonly name: string;
  /** Checks the host and builds what is shared (base image); throws a clear error naming what is missing. */
  prepare(): Promise<void>;
  /** Starts the sandbox (creating its filesystem the first time) and returns once an exec would succeed. */
  start(spec: SandboxSpec, hooks?: StartHooks): Promise<RuntimeRef>;
  /**
   * Optional split of `start` for a warm pool: `begin` does everything that does not depend on who
   * the sandbox is for (filesystem, cgroups, namespaces, capture listeners) and parks it;
   * `finish` attaches the egress and runs it; `abandon` undoes a parked start.
   */
  begin?(spec: SandboxSpec): Promise<unknown>;
  finish?(parked: unknown, hooks?: StartHooks): Promise<RuntimeRef>;
  abandon?(parked: unknown): Promise<void>;
  /** Places files (absolute path inside → content) read-only for the sandbox user, during `onNetwork`. */
  placeFiles(id: string, files: Record<string, string>, netnsPid: number): void;
  isRunning(ref: RuntimeRef): boolean;
  /** A pid whose network namespace is the sandbox's (for the egress proxy). */
  netnsPid(ref: RuntimeRef): number;
  exec(id: string, ref: RuntimeRef, req: ExecRequest): ExecProcess;
  /** Processes running in the sandbox beyond its own init (commands, background jobs). */
  busyProcesses(id: string): number;
  /** Stops every process; the filesystem is kept. Idempotent. */
  stop(id: string, ref: RuntimeRef | null): Promise<void>;
  /** Stops and removes everything the sandbox has on the host. Idempotent. */
  destroy(id: string, ref: RuntimeRef | null): Promise<void>;
  /** Writes the sandbox's filesystem changes (the writable layer) as a compressed archive. */
  snapshot(id: string, archivePath: string, ref: RuntimeRef | null): Promise<{ sizeBytes: number; usedBytes: number }>;
  /** After a platform restart: the egress listeners opened anew in a running sandbox's namespace. */
  captureNetwork?(ref: RuntimeRef, capture: { tcpPorts: number[]; dns: boolean }): Promise<CapturedNetwork>;
  /** After a platform restart: ends commands whose output nobody reads any more; returns how many. */
  endOrphanedCommands?(id: string, ref: RuntimeRef): number;
  /** A TCP connection to `port` on the sandbox's own loopback (service URLs). */
  connectPort(ref: RuntimeRef, port: number): Promise<net.Socket>;
  /** Whether the sandbox's memory cgroup recorded an OOM kill. */
  oomKills(id: string): number;
  describe(): string;
}
