import { execFile, spawn, spawnSync, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import type net from "node:net";
import path from "node:path";
import { promisify } from "node:util";
import {
  ensureBaseImage,
  SANDBOX_USER,
  cgroupLayout,
  type CgroupLayout,
  checkHost,
  HostNotReady,
  childrenOf,
  descendantsOf,
  isAlive,
  killGroupsAndProcesses,
  namespacePid,
  procRef,
  type ProcRef,
  ENTER_ENV_FD,
  enterArgs,
  enterEnvironment,
  holderArgs,
  releaseHolder,
  receiveListeners,
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

const execFileP = promisify(execFile);

export interface LocalDriverOptions {
  /** `$WHARF_HOME/sandboxes`: per-sandbox writable layers live here. */
  stateDir: string;
  /** Where the shared base image is cached. */
  baseCacheDir: string;
  /** Host uid (and gid) that sandbox processes run as; uid 1000 inside maps to it. */
  hostUid: number;
  pidsMax: number;
  /** An ext4 image per sandbox (hard fs_capacity_bytes) instead of a directory on the host's filesystem. */
  diskImages?: boolean;
  log?: (msg: string, extra?: object) => void;
}

/** Where each sandbox's overlay is mounted inside its own private mount namespace (never on the host). */
const MOUNT_POINT = "/run/wharf-sandbox-root";
/** Where a sandbox's disk image is mounted inside its own mount namespace (image mode). */
const DISK_POINT = "/run/wharf-sandbox-disk";

interface LocalRef {
  holder: ProcRef;
  init: ProcRef;
}

/** A start halfway through (see `LocalDriver.begin`): the holder waits at its gate. */
export interface ParkedStart {
  spec: SandboxSpec;
  child: ChildProcess;
  captured: CapturedNetwork & { done: boolean; handedOver: boolean };
  stderr: string;
  info: string;
  exited: number | null;
}

/** bubblewrap's part: user/pid/ipc/uts/cgroup namespaces, the root, seccomp, `sleep infinity` as the keeper. */
function bwrapArgs(): string[] {
  return [
    "--unshare-user",
    "--unshare-ipc",
    "--unshare-pid",
    "--unshare-uts",
    "--unshare-cgroup-try",
    "--disable-userns",
    "--uid",
    String(SANDBOX_USER.uid),
    "--gid",
    String(SANDBOX_USER.gid),
    "--hostname",
    "sandbox",
    "--bind",
    MOUNT_POINT,
    "/",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--chdir",
    SANDBOX_USER.home,
    "--seccomp",
    "3",
    "--info-fd",
    "4",
    "--clearenv",
    "--setenv",
    "PATH",
    "/usr/bin:/bin",
    "--",
    "/bin/sleep",
    "infinity",
  ];
}

export class LocalDriver implements SandboxDriver {
  readonly name = "local";
  private cg: CgroupLayout = cgroupLayout();
  private baseDir = "";
  private bpfFile = "";
  private bpfHex = "-";
  private sys = archSyscalls();
  private sysArg = "";

  constructor(private readonly opts: LocalDriverOptions) {}

  describe(): string {
    return `local (bubblewrap, overlayfs, ${this.cg.describe()}, seccomp ${this.bpfHex === "-" ? "off" : "on"})`;
  }

  async prepare(): Promise<void> {
    checkHost();
    fs.mkdirSync(path.join(this.opts.stateDir, "boxes"), { recursive: true, mode: 0o700 });
    this.releaseLeftImageMounts();
    fs.mkdirSync(MOUNT_POINT, { recursive: true, mode: 0o755 });
    fs.mkdirSync(DISK_POINT, { recursive: true, mode: 0o755 });
    const base = ensureBaseImage(this.opts.baseCacheDir, this.opts.log);
    this.baseDir = base.dir;
    const filter = buildSeccompFilter();
    this.bpfFile = path.join(this.opts.stateDir, "seccomp.bpf");
    if (!this.sys) throw new HostNotReady(`the local sandbox driver supports x86_64 and arm64, not ${process.arch}`);
    this.sysArg = Object.entries(this.sys)
      .map(([k, v]) => `${k}=${v}`)
      .join(",");
    if (filter) {
      fs.writeFileSync(this.bpfFile, filter, { mode: 0o644 });
      this.bpfHex = filter.toString("hex");
    } else {
      // bwrap needs a program; an empty one is refused, so fall back to "allow all".
      fs.writeFileSync(this.bpfFile, Buffer.from([0x06, 0, 0, 0, 0x00, 0x00, 0xff, 0x7f]));
      this.opts.log?.("seccomp filter unavailable on this architecture", { arch: process.arch });
    }
  }

  private boxDir(id: string): string {
    return path.join(this.opts.stateDir, "boxes", id);
  }

  private imagePath(id: string): string {
    return path.join(this.boxDir(id), "disk.img");
  }

  /** Creates the writable layer's first content: the home directory, or a snapshot's files. */
  private fillUpper(upper: string, snapshotArchive: string | null): void {
    fs.mkdirSync(upper, { recursive: true, mode: 0o755 });
    if (snapshotArchive) {
      execFileSyncChecked("tar", [
        "--zstd",
        "-x",
        "-p",
        "--numeric-owner",
        "--xattrs",
        "--xattrs-include=trusted.overlay.*",
        "-f",
        snapshotArchive,
        "-C",
        upper,
      ]);
    }
    // The sandbox's `/` is the writable layer's top folder. LangSmith runs commands as root (its
    // documented images), so clients create top-level folders of their own (Python deepagents'
    // execute writes its output under /large_tool_results). World-writable with the sticky bit, as
    // /tmp: the user can add entries to `/` but not rename or remove the base's (/etc, /usr, ...).
    // Set after a snapshot's files, whose archive carries the folder's mode from before.
    fs.chmodSync(upper, 0o1777);
    const home = path.join(upper, SANDBOX_USER.home);
    if (!fs.existsSync(home)) {
      fs.mkdirSync(home, { recursive: true, mode: 0o755 });
      fs.chownSync(home, this.opts.hostUid, this.opts.hostUid);
    }
  }

  /**
   * A process killed between mounting a stopped sandbox's image on the host and unmounting it
   * leaves the mount behind, and the sandbox's folder can then never be removed (EBUSY). Nothing
   * of this process is mounted yet when it starts, so every such mount is a leftover.
   */
  private releaseLeftImageMounts(): void {
    const boxes = path.join(this.opts.stateDir, "boxes");
    for (const id of fs.readdirSync(boxes)) {
      const dir = path.join(boxes, id);
      let names: string[];
      try {
        names = fs.readdirSync(dir);
      } catch {
        continue; // not a folder
      }
      for (const name of names.filter((n) => n.startsWith(".mnt-"))) {
        const mnt = path.join(dir, name);
        // Lazy: nothing uses it any more; "not mounted" is the usual answer and is fine.
        spawnSync("umount", ["-l", mnt], { stdio: "ignore" });
        try {
          fs.rmdirSync(mnt);
        } catch (err) {
          this.opts.log?.("a leftover image mount point could not be removed", { path: mnt, err });
        }
      }
    }
  }

  /** Runs `fn` with the (stopped) sandbox's disk image mounted on the host, then unmounts it. */
  private withImageMounted<T>(img: string, readOnly: boolean, fn: (root: string) => T): T {
    const mnt = fs.mkdtempSync(path.join(path.dirname(img), ".mnt-"));
    execFileSyncChecked("mount", ["-o", `loop,nosuid,nodev,noexec${readOnly ? ",ro" : ""}`, img, mnt]);
    const release = () => {
      execFileSyncChecked("umount", [mnt]);
      fs.rmdirSync(mnt);
    };
    let result: T;
    try {
      result = fn(mnt);
    } catch (err) {
      release();
      throw err;
    }
    if (result instanceof Promise) return result.finally(release) as T;
    release();
    return result;
  }

  private async prepareFilesystem(spec: SandboxSpec): Promise<{ image: string; upper: string; work: string }> {
    const dir = this.boxDir(spec.id);
    fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (this.opts.diskImages) {
      const img = this.imagePath(spec.id);
      if (!fs.existsSync(img)) {
        const tmp = `${img}.new`;
        fs.rmSync(tmp, { force: true });
        fs.closeSync(fs.openSync(tmp, "w", 0o600));
        fs.truncateSync(tmp, spec.fsCapacityBytes);
        await execFileP("mkfs.ext4", [
          "-q",
          "-F",
          "-m",
          "0",
          "-i",
          "65536",
          "-E",
          "lazy_itable_init=1,lazy_journal_init=1",
          tmp,
        ]);
        this.withImageMounted(tmp, false, (root) => {
          this.fillUpper(path.join(root, "upper"), spec.snapshotArchive);
          fs.chmodSync(root, 0o755);
        });
        fs.renameSync(tmp, img);
      }
      return { image: img, upper: path.join(DISK_POINT, "upper"), work: path.join(DISK_POINT, "work") };
    }
    const upper = path.join(dir, "upper");
    const work = path.join(dir, "work");
    if (!fs.existsSync(upper)) {
      const tmpUpper = `${upper}.new`;
      fs.rmSync(tmpUpper, { recursive: true, force: true });
      this.fillUpper(tmpUpper, spec.snapshotArchive);
      fs.renameSync(tmpUpper, upper);
    }
    // The work dir must be empty and on the same filesystem as upper; recreate it on every start.
    fs.rmSync(work, { recursive: true, force: true });
    fs.mkdirSync(work, { mode: 0o700 });
    return { image: "-", upper, work };
  }

  /** The writable layer as the host can reach it: through the holder's mount namespace while it runs. */
  private liveUpper(id: string, holderPid: number | null): string {
    if (!this.opts.diskImages) return path.join(this.boxDir(id), "upper");
    if (!holderPid) throw new Error("the sandbox's disk is not mounted");
    return `/proc/${holderPid}/root${DISK_POINT}/upper`;
  }

  async start(spec: SandboxSpec, hooks: StartHooks = {}): Promise<RuntimeRef> {
    return this.finish(await this.begin(spec), hooks);
  }

  /**
   * First half of a start: filesystem, cgroups, the holder with its network and mount namespaces,
   * the egress listeners handed over, the overlay mounted. Resolves once the holder waits at its
   * gate for the platform (nothing of the sandbox runs yet). A warm pool keeps sandboxes here.
   */
  async begin(spec: SandboxSpec): Promise<ParkedStart> {
    const { image, upper, work } = await this.prepareFilesystem(spec);
    await this.cg
      .destroy(spec.id)
      .catch((err) => this.opts.log?.("stale sandbox cgroups could not be removed", { id: spec.id, err }));
    this.cg.create(spec.id, { memBytes: spec.memBytes, pidsMax: this.opts.pidsMax, cpuMillicores: spec.cpuMillicores });
    const capture = spec.capture ?? null;
    const child = spawn(
      "/usr/bin/perl",
      [
        ...holderArgs(),
        this.sysArg,
        this.cg.procsFiles(spec.id).join(":"),
        capture ? capture.tcpPorts.join(",") : "-",
        capture?.dns ? "dns" : "nodns",
        image,
        DISK_POINT,
        spec.lowerDir ?? this.baseDir,
        upper,
        work,
        MOUNT_POINT,
        this.bpfFile,
        String(this.opts.hostUid),
        "--",
        ...bwrapArgs(),
      ],
      {
        detached: true,
        stdio: ["ignore", "ignore", "pipe", "ignore", "pipe", "pipe", ...(capture ? ["ipc" as const] : [])],
        env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
      },
    );
    const p: ParkedStart = {
      spec,
      child,
      captured: { tcp: new Map(), udp: [], errors: [], done: !capture, handedOver: false },
      stderr: "",
      info: "",
      exited: null,
    };
    const captured = p.captured;
    if (capture) {
      // The holder hands over the capture listeners, then says "done", before it reports the namespace.
      receiveListeners(child, captured);
    }
    child.stderr!.on("data", (d: Buffer) => {
      if (p.stderr.length < 4000) p.stderr += d.toString();
    });
    (child.stdio[4] as NodeJS.ReadableStream).on("data", (d: Buffer) => (p.info += d.toString()));
    child.on("exit", (code, signal) => (p.exited = code ?? 128 + (signal ? 9 : 0)));
    child.on("error", (err) => {
      p.stderr += err.message;
      p.exited = 127;
    });
    const deadline = Date.now() + 30_000;
    while (!(p.info.startsWith("netns\n") && captured.done)) {
      if (p.exited !== null || Date.now() > deadline) {
        await this.abandon(p);
        throw new Error(
          p.exited !== null
            ? `sandbox init exited with ${p.exited}: ${p.stderr.trim().slice(0, 500) || "no message"}`
            : `sandbox init did not come up in 30 s: ${p.stderr.trim().slice(0, 500)}`,
        );
      }
      await new Promise((r) => setTimeout(r, 1));
    }
    return p;
  }

  /** Gives up a begun start: the holder is killed, its listeners closed, its cgroups removed. */
  async abandon(parked: unknown): Promise<void> {
    const p = parked as ParkedStart;
    if (!p.captured.handedOver) {
      for (const l of p.captured.tcp.values()) if (l.listening) l.close();
      for (const u of p.captured.udp) {
        try {
          u.close();
        } catch {
          // already closed by its owner
        }
      }
    }
    this.killTree(p.spec.id, p.child.pid ?? 0, 0);
    await this.cg
      .destroy(p.spec.id)
      .catch((err) => this.opts.log?.("sandbox cgroups could not be removed", { id: p.spec.id, err }));
  }

  /** Second half: the egress attaches (`onNetwork`), the holder execs bubblewrap, the keeper is up. */
  async finish(parked: unknown, hooks: StartHooks = {}): Promise<RuntimeRef> {
    const p = parked as ParkedStart;
    const { child, captured, spec } = p;
    if (p.exited !== null) {
      await this.abandon(p);
      throw new Error(`sandbox init exited with ${p.exited}: ${p.stderr.trim().slice(0, 500) || "no message"}`);
    }
    // The namespace exists and has only loopback; nothing runs in it yet.
    captured.handedOver = Boolean(hooks.onNetwork);
    const handOver: CapturedNetwork | null = spec.capture
      ? { tcp: captured.tcp, udp: captured.udp, errors: captured.errors }
      : null;
    try {
      if (hooks.onNetwork) await hooks.onNetwork(child.pid!, handOver);
    } catch (err) {
      captured.handedOver = false;
      await this.abandon(p);
      throw err;
    }
    releaseHolder(child);
    const deadline = Date.now() + 30_000;
    let initPid = 0;
    for (;;) {
      if (p.exited !== null) {
        await this.abandon(p);
        throw new Error(`sandbox init exited with ${p.exited}: ${p.stderr.trim().slice(0, 500) || "no message"}`);
      }
      if (!initPid) {
        const m = /"child-pid"\s*:\s*(\d+)/.exec(p.info);
        if (m) initPid = Number(m[1]);
      }
      // bwrap's pid 1 forks the command only after the mounts, pivot_root and seccomp are in place.
      if (initPid && childrenOf(initPid).length > 0) break;
      if (Date.now() > deadline) {
        this.killTree(spec.id, 0, initPid);
        await this.abandon(p);
        throw new Error(`sandbox init did not come up in 30 s: ${p.stderr.trim().slice(0, 500)}`);
      }
      await new Promise((r) => setTimeout(r, 1));
    }
    // The platform may restart while the sandbox runs on: nothing of ours may keep it tied to us.
    child.unref();
    (child.stderr as unknown as { unref?: () => void }).unref?.();
    (child.stdio[4] as unknown as { unref?: () => void }).unref?.();
    const ref: LocalRef = { holder: procRef(child.pid!)!, init: procRef(initPid)! };
    if (!ref.holder || !ref.init) throw new Error(`sandbox init exited during start: ${p.stderr.trim().slice(0, 500)}`);
    return ref as unknown as RuntimeRef;
  }

  /**
   * Writes platform-provided files (CA certificates and the like) into the writable layer, owned by
   * root so the sandbox user can read but not change them. Refuses to follow a symlink anywhere on
   * the way: the layer's content is the sandbox's, not ours.
   */
  placeFiles(id: string, files: Record<string, string>, netnsPid: number): void {
    const upper = this.liveUpper(id, netnsPid);
    for (const [target, content] of Object.entries(files)) {
      const rel = path.posix.normalize(target).replace(/^\/+/, "");
      if (!rel || rel.startsWith("..")) throw new Error(`refusing to place a file at ${target}`);
      let cur = upper;
      for (const part of path.posix
        .dirname(rel)
        .split("/")
        .filter((p) => p && p !== ".")) {
        cur = path.join(cur, part);
        const st = fs.lstatSync(cur, { throwIfNoEntry: false });
        if (!st) fs.mkdirSync(cur, { mode: 0o755 });
        else if (!st.isDirectory())
          throw new Error(`refusing to place ${target}: ${part} is not a directory in the sandbox`);
      }
      const file = path.join(upper, rel);
      fs.rmSync(file, { force: true });
      fs.writeFileSync(file, content, { mode: 0o644, flag: "wx" });
    }
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
    return Math.max(0, this.cg.pids(id).length - 3);
  }

  exec(id: string, ref: RuntimeRef, req: ExecRequest): ExecProcess {
    const r = ref as unknown as LocalRef;
    const fsize = String(req.env.WHARF_FSIZE_LIMIT ?? 0);
    const env = Object.fromEntries(Object.entries(req.env).filter(([k]) => k !== "WHARF_FSIZE_LIMIT"));
    const pty = req.tty ? `${clampTty(req.tty.rows)}x${clampTty(req.tty.cols)}` : "-";
    const args = [
      ...enterArgs(),
      this.sysArg,
      String(ENTER_ENV_FD),
      String(SANDBOX_USER.uid),
      String(r.init.pid),
      String(r.init.start),
      this.cg.procsFiles(id).join(":"),
      this.bpfHex,
      fsize,
      req.cwd,
      pty,
      "--",
      ...req.argv,
    ];
    // An empty environment for the launcher (root); the command's own arrives on a pipe (a command
    // line is readable by every local user). With a terminal, fd 3 carries resize requests.
    const child = spawn("/usr/bin/perl", args, {
      stdio: ["pipe", "pipe", "pipe", req.tty ? "pipe" : "ignore", "pipe"],
      env: {},
    });
    const envPipe = child.stdio[ENTER_ENV_FD] as NodeJS.WritableStream;
    envPipe.on("error", () => undefined); // the launcher died before reading it: its exit says why
    envPipe.end(enterEnvironment(env));
    const control = req.tty ? (child.stdio[3] as NodeJS.WritableStream) : null;
    control?.on("error", () => undefined); // the launcher is gone: a late resize has nowhere to go
    const exited = new Promise<number>((resolve) => {
      child.on("exit", (code, signal) => resolve(code ?? 128 + signalNumber(signal)));
      child.on("error", () => resolve(127));
    });
    const hostPid = async (): Promise<number> => {
      // The launcher forks once to enter the pid namespace: the command is its child.
      for (let i = 0; i < 50 && child.pid; i++) {
        const kids = childrenOf(child.pid);
        if (kids.length) return kids[0];
        await new Promise((res) => setTimeout(res, 1));
      }
      return 0;
    };
    return {
      stdin: child.stdin!,
      stdout: child.stdout!,
      stderr: child.stderr!,
      exited,
      pid: async () => {
        const p = await hostPid();
        return p ? (namespacePid(p) ?? 0) : 0;
      },
      resize: control
        ? (rows: number, cols: number) => void control.write(`${clampTty(rows)} ${clampTty(cols)}\n`)
        : undefined,
      kill: () => {
        // With a terminal the command is a grandchild (the launcher's child pumps the terminal).
        killGroupsAndProcesses(child.pid ? descendantsOf(child.pid) : []);
        try {
          child.kill("SIGKILL");
        } catch {
          // the launcher already exited
        }
      },
    };
  }

  private killTree(id: string, holderPid: number, initPid: number): void {
    // SIGKILL to a pid namespace's init kills everything in that namespace (and commands that entered it).
    for (const p of [initPid, holderPid]) {
      if (!p) continue;
      try {
        process.kill(p, "SIGKILL");
      } catch {
        // the process (group) is already gone
      }
    }
    void id;
  }

  async stop(id: string, ref: RuntimeRef | null): Promise<void> {
    const r = ref as unknown as LocalRef | null;
    if (r) {
      if (isAlive(r.init)) this.killTree(id, 0, r.init.pid);
      if (isAlive(r.holder)) this.killTree(id, r.holder.pid, 0);
    }
    await this.cg.destroy(id);
    if (r) {
      const deadline = Date.now() + 5000;
      while ((isAlive(r.holder) || isAlive(r.init)) && Date.now() < deadline)
        await new Promise((res) => setTimeout(res, 2));
    }
  }

  async destroy(id: string, ref: RuntimeRef | null): Promise<void> {
    await this.stop(id, ref);
    await fs.promises.rm(this.boxDir(id), { recursive: true, force: true });
  }

  async snapshot(
    id: string,
    archivePath: string,
    ref: RuntimeRef | null,
  ): Promise<{ sizeBytes: number; usedBytes: number }> {
    fs.mkdirSync(path.dirname(archivePath), { recursive: true, mode: 0o700 });
    const tmp = `${archivePath}.part`;
    // Whiteouts (0/0 character devices) and opaque-directory xattrs are what make a layer a layer: keep them.
    const write = async (upper: string): Promise<number> => {
      if (!fs.existsSync(upper)) throw new Error("the sandbox has no filesystem");
      await execFileP(
        "tar",
        [
          "--zstd",
          "-c",
          "--numeric-owner",
          "--xattrs",
          "--xattrs-include=trusted.overlay.*",
          "-f",
          tmp,
          "-C",
          upper,
          ".",
        ],
        { maxBuffer: 1 << 20 },
      );
      const { stdout } = await execFileP("du", ["-sb", upper]);
      return Number(stdout.split("\t")[0]) || 0;
    };
    const r = ref as unknown as LocalRef | null;
    let used: number;
    if (this.opts.diskImages && !(r && isAlive(r.holder)))
      used = await this.withImageMounted(this.imagePath(id), true, (root) => write(path.join(root, "upper")));
    else used = await write(this.liveUpper(id, r?.holder.pid ?? null));
    fs.renameSync(tmp, archivePath);
    return { sizeBytes: fs.statSync(archivePath).size, usedBytes: used };
  }

  /**
   * After a platform restart: the launchers of commands the previous process started are orphans
   * (nobody reads their output); end those commands. Returns how many were ended.
   */
  endOrphanedCommands(id: string, ref: RuntimeRef): number {
    const r = ref as unknown as LocalRef;
    let ended = 0;
    for (const pid of this.cg.pids(id)) {
      if (pid === r.holder.pid) continue;
      let argv: string[];
      try {
        argv = fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0");
      } catch {
        continue; // exited meanwhile
      }
      if (argv[0] !== "/usr/bin/perl" || !isEnterCommand(argv.slice(1))) continue;
      killGroupsAndProcesses([...descendantsOf(pid), pid]);
      ended++;
    }
    return ended;
  }

  captureNetwork(ref: RuntimeRef, capture: { tcpPorts: number[]; dns: boolean }): Promise<CapturedNetwork> {
    const r = ref as unknown as LocalRef;
    return captureInNamespace(this.sys!, r.holder.pid, r.holder.start, capture);
  }

  connectPort(ref: RuntimeRef, port: number): Promise<net.Socket> {
    const r = ref as unknown as LocalRef;
    return connectInNamespace(this.sys!, r.holder.pid, r.holder.start, port);
  }

  oomKills(id: string): number {
    return this.cg.oomKills(id);
  }
}

function clampTty(n: number): number {
  return Math.max(1, Math.min(1000, Math.floor(n) || 1));
}

function execFileSyncChecked(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
  if (r.status !== 0) throw new Error(`${cmd} failed: ${r.stderr?.toString().trim().slice(0, 300)}`);
}

const SIGNALS: Record<string, number> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGABRT: 6,
  SIGKILL: 9,
  SIGSEGV: 11,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
};
function signalNumber(signal: NodeJS.Signals | null): number {
  return signal ? (SIGNALS[signal] ?? 1) : 1;
}

/** Whether a process's arguments (after perl's path) are the command launcher's (perl/enter.pl). */
function isEnterCommand(args: string[]): boolean {
  const enter = enterArgs();
  return enter.every((a, i) => args[i] === a);
}
