import fs from "node:fs";
import type net from "node:net";
import path from "node:path";
import {
  ensureBaseImage,
  cgroupLayout,
  checkHost,
  HostNotReady,
  isAlive,
  archSyscalls,
  buildSeccompFilter,
} from "../../confinement/index.ts";
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
import { placeFiles, releaseLeftImageMounts } from "./local/filesystem.ts";
import { boxDir, DISK_POINT, MOUNT_POINT, type LocalDriverOptions, type LocalHost } from "./local/host.ts";
import { endOrphanedCommands, stop } from "./local/kill.ts";
import type { LocalRef } from "./local/ref.ts";
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
    const host = this.host;
    checkHost();
    fs.mkdirSync(path.join(host.opts.stateDir, "boxes"), { recursive: true, mode: 0o700 });
    releaseLeftImageMounts(host);
    fs.mkdirSync(MOUNT_POINT, { recursive: true, mode: 0o755 });
    fs.mkdirSync(DISK_POINT, { recursive: true, mode: 0o755 });
    const base = ensureBaseImage(host.opts.baseCacheDir, host.opts.log);
    host.baseDir = base.dir;
    const filter = buildSeccompFilter();
    host.bpfFile = path.join(host.opts.stateDir, "seccomp.bpf");
    if (!host.sys) throw new HostNotReady(`the local sandbox driver supports x86_64 and arm64, not ${process.arch}`);
    host.sysArg = Object.entries(host.sys)
      .map(([k, v]) => `${k}=${v}`)
      .join(",");
    if (filter) {
      fs.writeFileSync(host.bpfFile, filter, { mode: 0o644 });
      host.bpfHex = filter.toString("hex");
    } else {
      // bwrap needs a program; an empty one is refused, so fall back to "allow all".
      fs.writeFileSync(host.bpfFile, Buffer.from([0x06, 0, 0, 0, 0x00, 0x00, 0xff, 0x7f]));
      host.opts.log?.("seccomp filter unavailable on this architecture", { arch: process.arch });
    }
  }

  async start(spec: SandboxSpec, hooks: StartHooks = {}): Promise<RuntimeRef> {
    return this.finish(await this.begin(spec), hooks);
  }

  begin(spec: SandboxSpec): Promise<ParkedStart> {
    return begin(this.host, spec);
  }

  abandon(parked: unknown): Promise<void> {
    return abandon(this.host, parked);
  }

  finish(parked: unknown, hooks: StartHooks = {}): Promise<RuntimeRef> {
    return finish(this.host, parked, hooks);
  }

  placeFiles(id: string, files: Record<string, string>, netnsPid: number): void {
    placeFiles(this.host, id, files, netnsPid);
  }

  isRunning(ref: RuntimeRef): boolean {
    const r = ref as unknown as LocalRef;
    return isAlive(r.init) && isAlive(r.holder);
  }

  netnsPid(ref: RuntimeRef): number {
    return (ref as unknown as LocalRef).holder.pid;
  }

  busyProcesses(id: string): number {
    // outer bwrap, bwrap as pid 1, sleep: everything beyond those three is work.
    return Math.max(0, this.host.cg.pids(id).length - 3);
  }

  exec(id: string, ref: RuntimeRef, req: ExecRequest): ExecProcess {
    return exec(this.host, id, ref, req);
  }

  stop(id: string, ref: RuntimeRef | null): Promise<void> {
    return stop(this.host, id, ref);
  }

  async destroy(id: string, ref: RuntimeRef | null): Promise<void> {
    await this.stop(id, ref);
    await fs.promises.rm(boxDir(this.host, id), { recursive: true, force: true });
  }

  snapshot(id: string, archivePath: string, ref: RuntimeRef | null): Promise<{ sizeBytes: number; usedBytes: number }> {
    return snapshot(this.host, id, archivePath, ref);
  }

  endOrphanedCommands(id: string, ref: RuntimeRef): number {
    return endOrphanedCommands(this.host, id, ref);
  }

  captureNetwork(ref: RuntimeRef, capture: { tcpPorts: number[]; dns: boolean }): Promise<CapturedNetwork> {
    const r = ref as unknown as LocalRef;
    return captureInNamespace(this.host.sys!, r.holder.pid, r.holder.start, capture);
  }

  connectPort(ref: RuntimeRef, port: number): Promise<net.Socket> {
    const r = ref as unknown as LocalRef;
    return connectInNamespace(this.host.sys!, r.holder.pid, r.holder.start, port);
  }

  oomKills(id: string): number {
    return this.host.cg.oomKills(id);
  }
}
