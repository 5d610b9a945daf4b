import fs from "node:fs";
import type net from "node:net";
import { archSyscalls, cgroupLayout, isAlive } from "../../confinement/index.ts";
import type {
  CapturedNetwork,
  ExecProcess,
  ExecRequest,
  RuntimeRef,
  SandboxDriver,
  SandboxSpec,
  StartHooks,
} from "./driver.ts";
import { captureInNamespace, connectInNamespace } from "./port-connect.ts";
import { exec } from "./local/exec.ts";
import { placeFiles } from "./local/filesystem.ts";
import { boxDir, type LocalDriverOptions, type LocalHost } from "./local/host.ts";
import { endOrphanedCommands, stop } from "./local/kill.ts";
import { prepareHost } from "./local/prepare.ts";
import { localRef } from "./local/ref.ts";
import { snapshot } from "./local/snapshot.ts";
import { abandon, begin, finish, type ParkedStart } from "./local/start.ts";

export type { LocalDriverOptions, ParkedStart };

export class LocalDriver implements SandboxDriver {
  readonly name = "local";
  private readonly host: LocalHost;

  constructor(opts: LocalDriverOptions) {
    this.host = { opts, cg: cgroupLayout(), baseDir: "", bpfFile: "", bpfHex: "-", sys: archSyscalls(), sysArg: "" };
  }

  describe(): string {
    return `local (bubblewrap, overlayfs, ${this.host.cg.describe()}, seccomp ${this.host.bpfHex === "-" ? "off" : "on"})`;
  }

  async prepare(): Promise<void> {
    prepareHost(this.host);
  }

  async start(spec: SandboxSpec, hooks: StartHooks = {}): Promise<RuntimeRef> {
    return this.finish(await this.begin(spec), hooks);
  }

  begin(spec: SandboxSpec): Promise<ParkedStart> {
    return begin(this.host, spec);
  }

  // `parked` is what `begin` returned: the interface keeps it opaque to the warm pool.
  abandon(parked: unknown): Promise<void> {
    return abandon(this.host, parked as ParkedStart);
  }

  finish(parked: unknown, hooks: StartHooks = {}): Promise<RuntimeRef> {
    return finish(this.host, parked as ParkedStart, hooks);
  }

  placeFiles(id: string, files: Record<string, string>, netnsPid: number): void {
    placeFiles(this.host, id, files, netnsPid);
  }

  isRunning(ref: RuntimeRef): boolean {
    const r = localRef(ref);
    return isAlive(r.init) && isAlive(r.holder);
  }

  netnsPid(ref: RuntimeRef): number {
    return localRef(ref).holder.pid;
  }

  busyProcesses(id: string): number {
    // outer bwrap, bwrap as pid 1, sleep: everything beyond those three is work.
    return Math.max(0, this.host.cg.pids(id).length - 3);
  }

  exec(id: string, ref: RuntimeRef, req: ExecRequest): ExecProcess {
    return exec(this.host, id, localRef(ref), req);
  }

  stop(id: string, ref: RuntimeRef | null): Promise<void> {
    return stop(this.host, id, ref ? localRef(ref) : null);
  }

  async destroy(id: string, ref: RuntimeRef | null): Promise<void> {
    await this.stop(id, ref);
    await fs.promises.rm(boxDir(this.host, id), { recursive: true, force: true });
  }

  snapshot(id: string, archivePath: string, ref: RuntimeRef | null): Promise<{ sizeBytes: number; usedBytes: number }> {
    return snapshot(this.host, id, archivePath, ref ? localRef(ref) : null);
  }

  endOrphanedCommands(id: string, ref: RuntimeRef): number {
    return endOrphanedCommands(this.host, id, localRef(ref));
  }

  captureNetwork(ref: RuntimeRef, capture: { tcpPorts: number[]; dns: boolean }): Promise<CapturedNetwork> {
    const r = localRef(ref);
    return captureInNamespace(this.host.sys!, r.holder.pid, r.holder.start, capture);
  }

  connectPort(ref: RuntimeRef, port: number): Promise<net.Socket> {
    const r = localRef(ref);
    return connectInNamespace(this.host.sys!, r.holder.pid, r.holder.start, port);
  }

  oomKills(id: string): number {
    return this.host.cg.oomKills(id);
  }
}
