import { spawn, type ChildProcess } from "node:child_process";
import {
  BWRAP_NAMESPACES,
  childrenOf,
  holderArgs,
  procRef,
  receiveListeners,
  releaseHolder,
  SANDBOX_USER,
} from "../../../confinement/index.ts";
import type { CapturedNetwork, SandboxSpec, StartHooks } from "../driver.ts";
import { prepareFilesystem, type WritableLayer } from "./filesystem.ts";
import { DISK_POINT, MOUNT_POINT, type LocalHost } from "./host.ts";
import { sigkill } from "./kill.ts";
import type { LocalRef } from "./ref.ts";

/** A start halfway through (see `begin`): the holder waits at its gate. */
export interface ParkedStart {
  spec: SandboxSpec;
  child: ChildProcess;
  captured: CapturedNetwork & { done: boolean; handedOver: boolean };
  stderr: string;
  info: string;
  exited: number | null;
  /** Why the holder could not be started at all (kept as the failed start's cause). */
  spawnError?: Error;
}

/** How long a start may take to reach each of its two waits (the gate, then the keeper). */
const START_TIMEOUT_MS = 30_000;

/** bubblewrap's part: user/pid/ipc/uts/cgroup namespaces, the root, seccomp, `sleep infinity` as the keeper. */
function bwrapArgs(): string[] {
  return [
    ...BWRAP_NAMESPACES,
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

/**
 * First half of a start: filesystem, cgroups, the holder with its network and mount namespaces,
 * the egress listeners handed over, the overlay mounted. Resolves once the holder waits at its
 * gate for the platform (nothing of the sandbox runs yet). A warm pool keeps sandboxes here.
 */
export async function begin(host: LocalHost, spec: SandboxSpec): Promise<ParkedStart> {
  const layer = await prepareFilesystem(host, spec);
  await host.cg
    .destroy(spec.id)
    .catch((err) => host.opts.log?.("stale sandbox cgroups could not be removed", { id: spec.id, err }));
  host.cg.create(spec.id, { memBytes: spec.memBytes, pidsMax: host.opts.pidsMax, cpuMillicores: spec.cpuMillicores });
  const p = spawnHolder(host, spec, layer);
  const deadline = Date.now() + START_TIMEOUT_MS;
  while (!(p.info.startsWith("netns\n") && p.captured.done)) {
    if (p.exited !== null || Date.now() > deadline) {
      await abandon(host, p);
      throw p.exited !== null ? initExited(p) : initTimedOut(p);
    }
    await new Promise((r) => setTimeout(r, 1));
  }
  return p;
}

/** The holder's arguments: what it joins, captures and mounts, then bubblewrap's command line. */
function holderCommand(host: LocalHost, spec: SandboxSpec, layer: WritableLayer): string[] {
  const capture = spec.capture ?? null;
  return [
    ...holderArgs(),
    host.sysArg,
    host.cg.procsFiles(spec.id).join(":"),
    capture ? capture.tcpPorts.join(",") : "-",
    capture?.dns ? "dns" : "nodns",
    layer.image,
    DISK_POINT,
    spec.lowerDir ?? host.baseDir,
    layer.upper,
    layer.work,
    MOUNT_POINT,
    host.bpfFile,
    String(host.opts.hostUid),
    "--",
    ...bwrapArgs(),
  ];
}

/** Starts the holder and follows what it reports (stderr, the info descriptor, its exit). */
function spawnHolder(host: LocalHost, spec: SandboxSpec, layer: WritableLayer): ParkedStart {
  const capture = spec.capture ?? null;
  const child = spawn("/usr/bin/perl", holderCommand(host, spec, layer), {
    detached: true,
    stdio: ["ignore", "ignore", "pipe", "ignore", "pipe", "pipe", ...(capture ? ["ipc" as const] : [])],
    env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin" },
  });
  const p: ParkedStart = {
    spec,
    child,
    captured: { tcp: new Map(), udp: [], errors: [], done: !capture, handedOver: false },
    stderr: "",
    info: "",
    exited: null,
  };
  if (capture) {
    // The holder hands over the capture listeners, then says "done", before it reports the namespace.
    receiveListeners(child, p.captured);
  }
  child.stderr!.on("data", (d: Buffer) => {
    if (p.stderr.length < 4000) p.stderr += d.toString();
  });
  (child.stdio[4] as NodeJS.ReadableStream).on("data", (d: Buffer) => (p.info += d.toString()));
  child.on("exit", (code, signal) => (p.exited = code ?? 128 + (signal ? 9 : 0)));
  child.on("error", (err) => {
    p.stderr += err.message;
    p.spawnError = err;
    p.exited = 127;
  });
  return p;
}

/** Gives up a begun start: the holder is killed, its listeners closed, its cgroups removed. */
export async function abandon(host: LocalHost, p: ParkedStart): Promise<void> {
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
  sigkill(p.child.pid ?? 0);
  await host.cg
    .destroy(p.spec.id)
    .catch((err) => host.opts.log?.("sandbox cgroups could not be removed", { id: p.spec.id, err }));
}

/** Second half: the egress attaches (`onNetwork`), the holder execs bubblewrap, the keeper is up. */
export async function finish(host: LocalHost, p: ParkedStart, hooks: StartHooks): Promise<LocalRef> {
  const { child } = p;
  if (p.exited !== null) {
    await abandon(host, p);
    throw initExited(p);
  }
  await handOverNetwork(host, p, hooks);
  releaseHolder(child);
  const initPid = await waitForKeeper(host, p);
  // The platform may restart while the sandbox runs on: nothing of ours may keep it tied to us.
  child.unref();
  unrefPipe(child.stderr);
  unrefPipe(child.stdio[4]);
  const holder = procRef(child.pid!);
  const init = procRef(initPid);
  if (!holder || !init) throw new Error(`sandbox init exited during start: ${stderrOf(p)}`, { cause: p.spawnError });
  return { holder, init };
}

/** The namespace exists and has only loopback; nothing runs in it yet: the egress attaches now. */
async function handOverNetwork(host: LocalHost, p: ParkedStart, hooks: StartHooks): Promise<void> {
  const { captured, spec } = p;
  captured.handedOver = Boolean(hooks.onNetwork);
  const handOver: CapturedNetwork | null = spec.capture
    ? { tcp: captured.tcp, udp: captured.udp, errors: captured.errors }
    : null;
  try {
    if (hooks.onNetwork) await hooks.onNetwork(p.child.pid!, handOver);
  } catch (err) {
    captured.handedOver = false;
    await abandon(host, p);
    throw err;
  }
}

/** Waits for bubblewrap's pid 1 to start the keeper; returns pid 1's host pid. */
async function waitForKeeper(host: LocalHost, p: ParkedStart): Promise<number> {
  const deadline = Date.now() + START_TIMEOUT_MS;
  let initPid = 0;
  for (;;) {
    if (p.exited !== null) {
      await abandon(host, p);
      throw initExited(p);
    }
    if (!initPid) initPid = childPidOf(p.info);
    // bwrap's pid 1 forks the command only after the mounts, pivot_root and seccomp are in place.
    if (initPid && childrenOf(initPid).length > 0) return initPid;
    if (Date.now() > deadline) {
      sigkill(initPid);
      await abandon(host, p);
      throw initTimedOut(p);
    }
    await new Promise((r) => setTimeout(r, 1));
  }
}

/** bubblewrap's `child-pid` (its pid 1 as the host sees it) from its info descriptor; 0 until written. */
function childPidOf(info: string): number {
  const m = /"child-pid"\s*:\s*(\d+)/.exec(info);
  return m ? Number(m[1]) : 0;
}

function stderrOf(p: ParkedStart): string {
  return p.stderr.trim().slice(0, 500);
}

function initExited(p: ParkedStart): Error {
  return new Error(`sandbox init exited with ${p.exited}: ${stderrOf(p) || "no message"}`, { cause: p.spawnError });
}

function initTimedOut(p: ParkedStart): Error {
  return new Error(`sandbox init did not come up in ${START_TIMEOUT_MS / 1000} s: ${stderrOf(p)}`);
}

/** Pipes to a child are sockets, which can stop holding the event loop open; typed as plain streams. */
function unrefPipe(stream: unknown): void {
  (stream as { unref?: () => void } | null)?.unref?.();
}
