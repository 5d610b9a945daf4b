/**
 * Whether a sandbox may start: decisions only (the manager gathers the figures and keeps
 * admissions one at a time), so every rule has a table test.
 *
 * Three layers, in this order:
 * 1. what this host can ever give one sandbox (memory vs its RAM, disk vs the free space of the
 *    sandboxes' folder): beyond that the request itself is wrong here, a 422 on the field;
 * 2. the workspace's quotas (count, running memory, disk): 429, as LangSmith's sandboxes answer a
 *    quota, with the words its SDK maps to a quota type (sandbox count, memory, storage);
 * 3. what the host has left after every running sandbox's commitment (times the overcommit
 *    factors): 503 Unschedulable, which clients retry later.
 */

export interface AdmissionRequest {
  memBytes: number;
  fsCapacityBytes: number;
  /** A new sandbox (counts, and commits its disk) or a start of an existing one (memory only). */
  creates: boolean;
}

export interface HostCapacity {
  memoryBytes: number;
  /** Free space of the filesystem the sandboxes' disks live on. */
  diskFreeBytes: number;
}

export interface Commitments {
  host: {
    /** mem_bytes of every running (provisioning or ready) sandbox on this host. */
    runningMemBytes: number;
    /** What existing sandboxes' disks may still grow by (capacity minus what they already use). */
    diskUnwrittenBytes: number;
  };
  workspace: {
    /** Sandboxes the workspace has, whatever their state (their disks stay while stopped). */
    sandboxes: number;
    runningMemBytes: number;
    diskBytes: number;
  };
}

export interface AdmissionLimits {
  memoryOvercommit: number;
  diskOvercommit: number;
  workspaceMaxSandboxes: number;
  workspaceMaxMemBytes: number;
  workspaceMaxDiskBytes: number;
}

export type Refusal =
  | { status: 422; field: "mem_bytes" | "fs_capacity_bytes"; message: string }
  | { status: 429; message: string }
  | { status: 503; message: string };

const GiB = 1024 ** 3;
/** Sizes for people: GiB with up to two decimals. */
export function gib(bytes: number): string {
  return `${Math.round((bytes / GiB) * 100) / 100} GiB`;
}

export function admit(
  req: AdmissionRequest,
  host: HostCapacity,
  now: Commitments,
  limits: AdmissionLimits,
): Refusal | null {
  const diskRoom = Math.max(0, Math.floor(host.diskFreeBytes * limits.diskOvercommit));
  if (req.memBytes > host.memoryBytes) {
    return {
      status: 422,
      field: "mem_bytes",
      message: `mem_bytes ${gib(req.memBytes)} is more than this host's memory (${gib(host.memoryBytes)})`,
    };
  }
  if (req.creates && req.fsCapacityBytes > diskRoom) {
    return {
      status: 422,
      field: "fs_capacity_bytes",
      message: `fs_capacity_bytes ${gib(req.fsCapacityBytes)} is more than this host can give a disk (${gib(diskRoom)} free)`,
    };
  }

  const ws = now.workspace;
  if (req.creates && ws.sandboxes + 1 > limits.workspaceMaxSandboxes) {
    return {
      status: 429,
      message: `Sandbox count quota reached: this workspace may have ${limits.workspaceMaxSandboxes} sandboxes and has ${ws.sandboxes}; delete one first`,
    };
  }
  if (ws.runningMemBytes + req.memBytes > limits.workspaceMaxMemBytes) {
    return {
      status: 429,
      message: `Memory quota exceeded: this workspace's running boxes may hold ${gib(limits.workspaceMaxMemBytes)} of memory in all; they hold ${gib(ws.runningMemBytes)} and this one asks ${gib(req.memBytes)}; stop one first`,
    };
  }
  if (req.creates && ws.diskBytes + req.fsCapacityBytes > limits.workspaceMaxDiskBytes) {
    return {
      status: 429,
      message: `Storage quota exceeded: this workspace's boxes may have ${gib(limits.workspaceMaxDiskBytes)} of disk in all; they have ${gib(ws.diskBytes)} and this one asks ${gib(req.fsCapacityBytes)}; delete one first`,
    };
  }

  const memRoom = Math.floor(host.memoryBytes * limits.memoryOvercommit);
  if (now.host.runningMemBytes + req.memBytes > memRoom) {
    return {
      status: 503,
      message: `Unschedulable: this host's memory is committed to running sandboxes (${gib(now.host.runningMemBytes)} of ${gib(memRoom)}); try again later or ask for less than ${gib(Math.max(0, memRoom - now.host.runningMemBytes))}`,
    };
  }
  if (req.creates && now.host.diskUnwrittenBytes + req.fsCapacityBytes > diskRoom) {
    return {
      status: 503,
      message: `Unschedulable: this host's free disk is committed to existing sandboxes (${gib(now.host.diskUnwrittenBytes)} of ${gib(diskRoom)}); try again later or ask for less than ${gib(Math.max(0, diskRoom - now.host.diskUnwrittenBytes))}`,
    };
  }
  return null;
}
