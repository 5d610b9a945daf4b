import { spawn, type ChildProcess } from "node:child_process";
import {
  childrenOf,
  holderArgs,
  procRef,
  receiveListeners,
  releaseHolder,
  SANDBOX_USER,
} from "../../../confinement/index.ts";
import type { CapturedNetwork, RuntimeRef, SandboxSpec, StartHooks } from "../driver.ts";
import { prepareFilesystem } from "./filesystem.ts";
import { DISK_POINT, MOUNT_POINT, type LocalHost } from "./host.ts";
import { killTree } from "./kill.ts";
import type { LocalRef } from "./ref.ts";

/** A start halfway through (see `begin`): the holder waits at its gate. */
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

/**
 * First half of a start: filesystem, cgroups, the holder with its network and mount namespaces,
 * the egress listeners handed over, the overlay mounted. Resolves once the holder waits at its
 * gate for the platform (nothing of the sandbox runs yet). A warm pool keeps sandboxes here.
 */
export async function begin(host: LocalHost, spec: SandboxSpec): Promise<ParkedStart> {
  const { image, upper, work } = await prepareFilesystem(host, spec);
  await host.cg
    .destroy(spec.id)
    .catch((err) => host.opts.log?.("stale sandbox cgroups could not be removed", { id: spec.id, err }));
  host.cg.create(spec.id, { memBytes: spec.memBytes, pidsMax: host.opts.pidsMax, cpuMillicores: spec.cpuMillicores });
  const capture = spec.capture ?? null;
  const child = spawn(
    "/usr/bin/perl",
    [
      ...holderArgs(),
      host.sysArg,
      host.cg.procsFiles(spec.id).join(":"),
      capture ? capture.tcpPorts.join(",") : "-",
      capture?.dns ? "dns" : "nodns",
      image,
      DISK_POINT,
      spec.lowerDir ?? host.baseDir,
      upper,
      work,
      MOUNT_POINT,
      host.bpfFile,
      String(host.opts.hostUid),
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
      await abandon(host, p);
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
export async function abandon(host: LocalHost, parked: unknown): Promise<void> {
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
  killTree(p.spec.id, p.child.pid ?? 0, 0);
  await host.cg
    .destroy(p.spec.id)
    .catch((err) => host.opts.log?.("sandbox cgroups could not be removed", { id: p.spec.id, err }));
}

/** Second half: the egress attaches (`onNetwork`), the holder execs bubblewrap, the keeper is up. */
export async function finish(host: LocalHost, parked: unknown, hooks: StartHooks = {}): Promise<RuntimeRef> {
  const p = parked as ParkedStart;
  const { child, captured, spec } = p;
  if (p.exited !== null) {
    await abandon(host, p);
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
    await abandon(host, p);
    throw err;
  }
  releaseHolder(child);
  const deadline = Date.now() + 30_000;
  let initPid = 0;
  for (;;) {
    if (p.exited !== null) {
      await abandon(host, p);
      throw new Error(`sandbox init exited with ${p.exited}: ${p.stderr.trim().slice(0, 500) || "no message"}`);
    }
    if (!initPid) {
      const m = /"child-pid"\s*:\s*(\d+)/.exec(p.info);
      if (m) initPid = Number(m[1]);
    }
    // bwrap's pid 1 forks the command only after the mounts, pivot_root and seccomp are in place.
    if (initPid && childrenOf(initPid).length > 0) break;
    if (Date.now() > deadline) {
      killTree(spec.id, 0, initPid);
      await abandon(host, p);
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
