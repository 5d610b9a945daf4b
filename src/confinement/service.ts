import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { PassThrough, type Readable, type Writable } from "node:stream";
import { ensureBaseImage } from "./base-image.ts";
import { BWRAP_NAMESPACES } from "./bwrap-namespaces.ts";
import { cgroupLayout, type CgroupLayout, type Limits } from "./cgroups.ts";
import type { CapturedNetwork } from "./network.ts";
import { checkHost } from "./host-check.ts";
import { releaseHolder } from "./launchers.ts";
import { perlArgs } from "./perl-programs.ts";
import { receiveListeners } from "./listener-handover.ts";
import { archSyscalls, buildSeccompFilter } from "./seccomp.ts";

/**
 * A long-running (or run-to-completion) program confined with the sandbox driver's building blocks:
 * the same root holder (cgroups joined before it can fork, its own network and mount namespaces
 * with loopback only, optional egress capture listeners handed to the platform, a gate while the
 * platform attaches the network), then bubblewrap as an unprivileged host uid with new user, pid,
 * ipc, uts and cgroup namespaces, the seccomp filter, a cleared environment and `--die-with-parent`;
 * a watchdog forked by the holder (root, in the cgroup) empties the cgroup once the platform's end of
 * its stdin pipe closes or bwrap is gone, so a platform killed with SIGKILL takes its services with
 * it: no orphans.
 *
 * The filesystem is built from nothing (bubblewrap's own empty root): the sandbox base image's
 * `/usr` and curated `/etc` read-only, a private `/tmp`, and exactly the binds the caller lists.
 * The root is remounted read-only at the end, so the only writable places are `/tmp` and the
 * binds marked `rw`.
 */
export interface ConfinedSpec {
  /** Names the cgroup (`wharf/<id>`); unique among running confined programs and sandboxes. */
  id: string;
  /** Host uid and gid the program runs as (uid 1000 inside). */
  hostUid: number;
  limits: Limits;
  /**
   * Host paths shown at the same path inside (or at `dest`), read-only unless `rw`. With `beneath`
   * (a folder of the platform's that holds `src`), the part of `src` below it is resolved without
   * following any link: the trees deployed code writes are bound only as what they really are.
   */
  binds: ServiceBind[];
  /**
   * Writable views of a host folder: the folder is the read-only lower layer of an overlay whose
   * changes go to a scratch layer of this run only (a shared cache that nobody inside can poison).
   */
  overlays?: Array<{ lower: string; dest: string }>;
  /** Symbolic links created inside: `link` → `target`. */
  symlinks?: Array<{ link: string; target: string }>;
  /**
   * An ext4 image loop-mounted by the holder in its own mount namespace (never on the host) and
   * shown writable at `dest`: a folder with a hard size. Mounts of one image by several programs at
   * once share its loop device and filesystem (util-linux reuses the device of the same file).
   */
  disk?: { image: string; dest: string } | null;
  env: Record<string, string>;
  cwd: string;
  argv: string[];
  /** Host folder of the platform's own (never shown inside) for the holder's scratch mounts. */
  scratchDir: string;
  /** Sandbox base image cache (shared with sandboxes). */
  baseCacheDir: string;
  /** Listeners to open inside the network namespace and hand to the platform (egress, platform API). */
  capture?: { tcpPorts: number[]; dns: boolean } | null;
  /** Called once the network namespace exists, before anything runs in it. */
  onNetwork?: (netnsPid: number, captured: CapturedNetwork | null) => Promise<void>;
  hostname?: string;
}

export interface ServiceBind {
  src: string;
  dest?: string;
  rw?: boolean;
  beneath?: string;
  /** A small read-only file that never changes while shown: copied, so no host path shows for it. */
  copy?: boolean;
  /**
   * A writable folder that holds unix sockets the host side connects to: bound as it is (a socket
   * bound through an overlay is another inode than the host's path names), so its path shows.
   * Other writable folders are overlays whose upper layer is the folder itself, named by descriptor.
   */
  sockets?: boolean;
}

export interface ConfinedProcess {
  child: ChildProcess;
  stdout: Readable;
  stderr: Readable;
  /** Exit code of the program (null when killed by a signal or it never started). */
  exited: Promise<number | null>;
  /** SIGTERM to the program, then everything in its cgroup is killed after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

let prepared: { baseDir: string; bpfFile: string; sysArg: string } | null = null;

/** Checks the host once and readies the base image and the seccomp program. */
export function prepareConfinement(
  baseCacheDir: string,
  scratchRoot: string,
): { baseDir: string; bpfFile: string; sysArg: string } {
  if (prepared && fs.existsSync(prepared.bpfFile) && fs.existsSync(prepared.baseDir)) return prepared;
  checkHost();
  const sys = archSyscalls();
  if (!sys) throw new Error(`confinement supports x86_64 and arm64, not ${process.arch}`);
  const base = ensureBaseImage(baseCacheDir);
  fs.mkdirSync(scratchRoot, { recursive: true, mode: 0o700 });
  const bpfFile = path.join(scratchRoot, "seccomp.bpf");
  // bwrap needs a program; without a table for this architecture, "allow all".
  fs.writeFileSync(bpfFile, buildSeccompFilter() ?? Buffer.from([0x06, 0, 0, 0, 0x00, 0x00, 0xff, 0x7f]), {
    mode: 0o644,
  });
  fs.mkdirSync(SERVICE_MOUNT, { recursive: true, mode: 0o755 });
  fs.mkdirSync(SERVICE_DISK, { recursive: true, mode: 0o755 });
  prepared = {
    baseDir: base.dir,
    bpfFile,
    sysArg: Object.entries(sys)
      .map(([k, v]) => `${k}=${v}`)
      .join(","),
  };
  return prepared;
}

/** Where the holder stages the bind sources, inside its own mount namespace only. */
const SERVICE_MOUNT = "/run/wharf-service-root";

/** The holder's fd from which bubblewrap reads the rest of its arguments (the environment). */
const ENV_FD = 7;

/** Where the holder mounts a spec's disk image, inside its own mount namespace only. */
const SERVICE_DISK = "/run/wharf-service-disk";

/** Every bind of a spec, the base image's `/usr` and `/etc` first (all staged by the holder). */
function stagedBinds(
  spec: Pick<ConfinedSpec, "binds" | "overlays" | "disk">,
  baseDir: string,
): Array<ServiceBind & { overlay?: string; disk?: boolean }> {
  return [
    { src: path.join(baseDir, "usr"), dest: "/usr" },
    { src: path.join(baseDir, "etc"), dest: "/etc" },
    ...spec.binds,
    ...(spec.overlays ?? []).map((o, i) => ({ src: o.lower, dest: o.dest, rw: true, overlay: `overlay-${i}` })),
    ...(spec.disk ? [{ src: SERVICE_DISK, dest: spec.disk.dest, rw: true, disk: true }] : []),
  ];
}

/** bubblewrap's arguments for a spec: pure, so the mount plan is testable without root. */
export function serviceBwrapArgs(
  spec: Pick<ConfinedSpec, "binds" | "overlays" | "disk" | "symlinks" | "env" | "cwd" | "argv" | "hostname">,
  baseDir: string,
): string[] {
  const binds = stagedBinds(spec, baseDir);
  const a = [
    ...BWRAP_NAMESPACES,
    "--die-with-parent",
    "--new-session",
    "--uid",
    "1000",
    "--gid",
    "1000",
    "--hostname",
    spec.hostname ?? "service",
    "--symlink",
    "usr/bin",
    "/bin",
    "--symlink",
    "usr/sbin",
    "/sbin",
    "--symlink",
    "usr/lib",
    "/lib",
    "--proc",
    "/proc",
    "--dev",
    "/dev",
    "--tmpfs",
    "/tmp",
    "--dir",
    "/home",
    "--dir",
    "/run",
  ];
  if (fs.existsSync(path.join(baseDir, "usr/lib64"))) a.push("--symlink", "usr/lib64", "/lib64");
  // Sources as the holder staged them (see perl/service-stage.pl).
  binds.forEach((b, i) => a.push(b.rw ? "--bind" : "--ro-bind", `${SERVICE_MOUNT}/${i}`, b.dest ?? b.src));
  for (const s of spec.symlinks ?? []) a.push("--symlink", s.target, s.link);
  // The environment comes from a pipe (`envArgs`), never on a command line: any local user reads
  // those in /proc.
  a.push(
    "--remount-ro",
    "/",
    "--chdir",
    spec.cwd,
    "--seccomp",
    "3",
    "--info-fd",
    "4",
    "--clearenv",
    "--args",
    String(ENV_FD),
  );
  a.push("--", ...spec.argv);
  return a;
}

/** What bubblewrap reads from its `--args` descriptor: one `--setenv NAME VALUE` per variable, NUL-separated. */
export function envArgs(env: Record<string, string>): Buffer {
  const parts: string[] = [];
  for (const [k, v] of Object.entries(env)) {
    if (k.includes("\0") || k.includes("=") || v.includes("\0"))
      throw new Error(
        `environment variable ${k.replace(/\0/g, "")} cannot be passed (NUL or = in its name, or NUL in its value)`,
      );
    parts.push("--setenv", k, v);
  }
  return Buffer.from(parts.map((p) => p + "\0").join(""));
}

/**
 * One record of the holder's bind list (see perl/service-stage.pl): a source below its `beneath`
 * folder is named relative to it, so the holder resolves that part without following links.
 */
export function bindRecord(i: number, b: ServiceBind & { overlay?: string }): string[] {
  const name = b.dest ?? b.src;
  // "o": a writable overlay of a scratch layer; "c": a copy; "r": a read-only view (a folder) or a
  // file bound from one; "b": a writable folder (an overlay writing to it); "s": a writable bind.
  const kind = b.overlay ? "o" : b.copy ? "c" : b.rw ? (b.sockets ? "s" : "b") : "r";
  if (!b.beneath) return [String(i), kind, b.src, "", name];
  const rel = path.relative(b.beneath, b.src);
  if (!rel || rel.startsWith("..") || path.isAbsolute(rel))
    throw new Error(`bind source for ${name} is not below its folder`);
  return [String(i), kind, b.beneath, rel, name];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Kills everything in a confined program's cgroup and removes it (idempotent). */
export async function killConfined(id: string): Promise<void> {
  await cgroupLayout().destroy(id);
}

/** Process ids in a confined program's cgroup (empty when it is not running). */
export function confinedPids(id: string): number[] {
  return cgroupLayout().pids(id);
}

/** Starts the program; resolves once it runs inside its namespaces (not once it is ready). */
export async function startConfined(spec: ConfinedSpec): Promise<ConfinedProcess> {
  const { baseDir, bpfFile, sysArg } = prepareConfinement(spec.baseCacheDir, path.dirname(spec.scratchDir));
  const cg = cgroupLayout();
  await cg.destroy(spec.id).catch(() => undefined); // best effort: a cgroup still busy is removed by the next start
  cg.create(spec.id, spec.limits);
  const scratch = prepareScratch(spec, baseDir);
  const capture = spec.capture ?? null;
  const child = spawnHolder(spec, { baseDir, bpfFile, sysArg, cg, ...scratch });
  const envPipe = sendEnvironment(child, scratch.env);
  const watch = watchHolder(child, capture);
  const fail = async (why: string, cause?: unknown): Promise<never> => {
    try {
      child.kill("SIGKILL");
    } catch {
      /* already gone */
    }
    await cg.destroy(spec.id).catch(() => undefined); // best effort: a cgroup still busy is removed by the next start
    fs.rmSync(spec.scratchDir, { recursive: true, force: true });
    const message = `${why}: ${watch.early.trim().slice(0, 800) || "no message"}`;
    throw cause === undefined ? new Error(message) : new Error(message, { cause });
  };
  const deadline = Date.now() + 30_000;
  while (!(watch.info.startsWith("netns\n") && watch.captured.done)) {
    if (watch.exitCode !== undefined) return fail(`the confinement did not start (exit ${watch.exitCode})`);
    if (Date.now() > deadline) return fail("the confinement did not start in 30 s");
    await sleep(2);
  }
  try {
    const { tcp, udp, errors } = watch.captured;
    await spec.onNetwork?.(child.pid!, capture ? { tcp, udp, errors } : null);
  } catch (err) {
    for (const l of watch.captured.tcp.values()) if (l.listening) l.close();
    return fail(`attaching the network failed: ${(err as Error).message}`, err);
  }
  releaseHolder(child);
  while (!/"child-pid"/.test(watch.info)) {
    if (watch.exitCode !== undefined) return fail(`the confined program did not start (exit ${watch.exitCode})`);
    if (Date.now() > deadline) return fail("the confined program did not start in 30 s");
    await sleep(2);
  }
  // bubblewrap read its arguments before it started the program, which inherits the descriptor:
  // our end goes, so the program holds nothing that reaches the platform.
  envPipe.destroy();
  return { child, stdout: child.stdout!, stderr: watch.stderr, exited: watch.exited, stop: stopper(spec, cg, watch) };
}

/**
 * The spec's scratch folder, made afresh: the holder's bind list and the work folders of writable
 * overlays; and the environment as bubblewrap will read it (refused before anything runs).
 */
function prepareScratch(spec: ConfinedSpec, baseDir: string): { bindList: string; workRoot: string; env: Buffer } {
  fs.rmSync(spec.scratchDir, { recursive: true, force: true });
  fs.mkdirSync(spec.scratchDir, { recursive: true, mode: 0o700 });
  const bindList = path.join(spec.scratchDir, "binds");
  // The holder makes the work folders of writable overlays here: the platform's own, on the same
  // filesystem as the deployments' folders, removed with the scratch folder.
  const workRoot = path.join(spec.scratchDir, "work");
  fs.mkdirSync(workRoot, { mode: 0o700 });
  // A disk's mount point exists only in the holder's namespace, once it has mounted the image.
  const entries = stagedBinds(spec, baseDir).map((b, i) => bindRecord(i, b));
  const env = envArgs(spec.env);
  fs.writeFileSync(bindList, entries.map((e) => e.join("\0")).join("\0"), { mode: 0o600 });
  return { bindList, workRoot, env };
}

/** The root holder (see perl/service-holder.pl), told everything on its command line but the environment. */
function spawnHolder(
  spec: ConfinedSpec,
  p: { baseDir: string; bpfFile: string; sysArg: string; cg: CgroupLayout; bindList: string; workRoot: string },
): ChildProcess {
  const capture = spec.capture ?? null;
  return spawn(
    "/usr/bin/perl",
    [
      ...perlArgs("service-holder"),
      p.sysArg,
      p.cg.procsFiles(spec.id).join(":"),
      capture ? capture.tcpPorts.join(",") : "-",
      capture?.dns ? "dns" : "nodns",
      spec.disk?.image ?? "-",
      SERVICE_DISK,
      p.bindList,
      p.workRoot,
      "-",
      SERVICE_MOUNT,
      p.bpfFile,
      String(spec.hostUid),
      "--",
      ...serviceBwrapArgs(spec, p.baseDir),
    ],
    {
      stdio: ["pipe", "pipe", "pipe", "ignore", "pipe", "pipe", capture ? "ipc" : "ignore", "pipe"],
      env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
    },
  );
}

/** Writes the environment to bubblewrap's `--args` pipe; the pipe, closed once the program runs. */
function sendEnvironment(child: ChildProcess, env: Buffer): Writable {
  const envPipe = (child.stdio as unknown as Writable[])[ENV_FD];
  envPipe.on("error", () => {
    // The holder failed before bubblewrap read it: its exit says why.
  });
  envPipe.end(env);
  return envPipe;
}

/** What the platform follows of a starting holder: its exit, its first words, its info and the listeners it hands over. */
interface HolderWatch {
  exitCode: number | null | undefined;
  exited: Promise<number | null>;
  /** The start of what bubblewrap says, for the error when the start fails. */
  early: string;
  stderr: PassThrough;
  /** bubblewrap's info descriptor: `netns` once the namespace exists, then the child's pid. */
  info: string;
  captured: CapturedNetwork & { done: boolean };
}

function watchHolder(child: ChildProcess, capture: ConfinedSpec["capture"]): HolderWatch {
  const captured: HolderWatch["captured"] = { tcp: new Map(), udp: [], errors: [], done: !capture };
  if (capture) {
    receiveListeners(child, captured);
  }
  const watch: HolderWatch = {
    exitCode: undefined,
    exited: new Promise<number | null>((resolve) => {
      child.once("error", () => resolve((watch.exitCode = null)));
      child.once("exit", (code, signal) => resolve((watch.exitCode = signal ? null : code)));
    }),
    early: "",
    stderr: new PassThrough(),
    info: "",
    captured,
  };
  // Everything bubblewrap says (its own set-up errors come after it reports the child's pid) is
  // kept for whoever reads stderr later.
  child.stderr!.on("data", (d: Buffer) => {
    if (watch.early.length < 4000) watch.early += d.toString();
    watch.stderr.write(d);
  });
  child.stderr!.on("end", () => watch.stderr.end());
  (child.stdio[4] as Readable).on("data", (d: Buffer) => (watch.info += d.toString()));
  return watch;
}

/** The program's stop: SIGTERM to it, then everything in its cgroup is killed after `graceMs`. */
function stopper(spec: ConfinedSpec, cg: CgroupLayout, watch: HolderWatch): (graceMs?: number) => Promise<void> {
  return async (graceMs = 5000) => {
    if (watch.exitCode === undefined) {
      // bubblewrap does not forward signals: TERM the program itself (every process but bwrap's).
      for (const pid of cg.pids(spec.id)) {
        try {
          if (fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim() !== "bwrap") process.kill(pid, "SIGTERM");
        } catch {
          /* exited meanwhile */
        }
      }
      await Promise.race([watch.exited, sleep(graceMs)]);
    }
    await cg.destroy(spec.id).catch(() => undefined); // best effort: a cgroup still busy is removed by the next start
    await watch.exited;
    fs.rmSync(spec.scratchDir, { recursive: true, force: true });
  };
}
