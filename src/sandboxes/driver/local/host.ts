import path from "node:path";
import type { CgroupLayout, LauncherSyscalls } from "../../../confinement/index.ts";

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

/** What every part of the local driver shares: its options and what `prepare` set up on the host. */
export interface LocalHost {
  opts: LocalDriverOptions;
  cg: CgroupLayout;
  baseDir: string;
  bpfFile: string;
  bpfHex: string;
  sys: LauncherSyscalls | null;
  sysArg: string;
}

/** Where each sandbox's overlay is mounted inside its own private mount namespace (never on the host). */
export const MOUNT_POINT = "/run/wharf-sandbox-root";
/** Where a sandbox's disk image is mounted inside its own mount namespace (image mode). */
export const DISK_POINT = "/run/wharf-sandbox-disk";

export function boxDir(host: LocalHost, id: string): string {
  return path.join(host.opts.stateDir, "boxes", id);
}

export function imagePath(host: LocalHost, id: string): string {
  return path.join(boxDir(host, id), "disk.img");
}
