import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { formatExt4, SANDBOX_USER } from "../../../confinement/index.ts";
import type { SandboxSpec } from "../driver.ts";
import { boxDir, DISK_POINT, imagePath, type LocalHost } from "./host.ts";

/** Creates the writable layer's first content: the home directory, or a snapshot's files. */
function fillUpper(host: LocalHost, upper: string, snapshotArchive: string | null): void {
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
    fs.chownSync(home, host.opts.hostUid, host.opts.hostUid);
  }
}

/**
 * A process killed between mounting a stopped sandbox's image on the host and unmounting it
 * leaves the mount behind, and the sandbox's folder can then never be removed (EBUSY). Nothing
 * of this process is mounted yet when it starts, so every such mount is a leftover.
 */
export function releaseLeftImageMounts(host: LocalHost): void {
  const boxes = path.join(host.opts.stateDir, "boxes");
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
        host.opts.log?.("a leftover image mount point could not be removed", { path: mnt, err });
      }
    }
  }
}

/** Runs `fn` with the (stopped) sandbox's disk image mounted on the host, then unmounts it. */
export function withImageMounted<T>(img: string, readOnly: boolean, fn: (root: string) => T): T {
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

/** A sandbox's writable layer as the holder mounts it: the disk image ("-": none), upper and work folders. */
export interface WritableLayer {
  image: string;
  upper: string;
  work: string;
}

export async function prepareFilesystem(host: LocalHost, spec: SandboxSpec): Promise<WritableLayer> {
  const dir = boxDir(host, spec.id);
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (host.opts.diskImages) {
    const img = imagePath(host, spec.id);
    if (!fs.existsSync(img)) {
      const tmp = `${img}.new`;
      fs.rmSync(tmp, { force: true });
      fs.closeSync(fs.openSync(tmp, "w", 0o600));
      fs.truncateSync(tmp, spec.fsCapacityBytes);
      await formatExt4(tmp, { bytesPerInode: 65536 });
      withImageMounted(tmp, false, (root) => {
        fillUpper(host, path.join(root, "upper"), spec.snapshotArchive);
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
    fillUpper(host, tmpUpper, spec.snapshotArchive);
    fs.renameSync(tmpUpper, upper);
  }
  // The work dir must be empty and on the same filesystem as upper; recreate it on every start.
  fs.rmSync(work, { recursive: true, force: true });
  fs.mkdirSync(work, { mode: 0o700 });
  return { image: "-", upper, work };
}

/** The writable layer as the host can reach it: through the holder's mount namespace while it runs. */
export function liveUpper(host: LocalHost, id: string, holderPid: number | null): string {
  if (!host.opts.diskImages) return path.join(boxDir(host, id), "upper");
  if (!holderPid) throw new Error("the sandbox's disk is not mounted");
  return `/proc/${holderPid}/root${DISK_POINT}/upper`;
}

/**
 * Writes platform-provided files (CA certificates and the like) into the writable layer, owned by
 * root so the sandbox user can read but not change them. Refuses to follow a symlink anywhere on
 * the way: the layer's content is the sandbox's, not ours.
 */
export function placeFiles(host: LocalHost, id: string, files: Record<string, string>, netnsPid: number): void {
  const upper = liveUpper(host, id, netnsPid);
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

function execFileSyncChecked(cmd: string, args: string[]): void {
  const r = spawnSync(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
  if (r.status !== 0)
    throw new Error(`${cmd} failed: ${r.stderr?.toString().trim().slice(0, 300)}`, { cause: r.error });
}
