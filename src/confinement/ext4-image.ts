import { execFile } from "node:child_process";
import { promisify } from "node:util";

const execFileP = promisify(execFile);

/**
 * Formats an already sized file as ext4 for a confined process's private disk: no reserved blocks (the
 * whole size is the tenant's), inode tables written lazily so a fresh disk costs milliseconds, and
 * optionally owned by a uid and seeded with a folder's contents (`mkfs -d`).
 */
export function formatExt4(
  file: string,
  opts: { bytesPerInode: number; rootOwner?: number; seedDir?: string },
): Promise<{ stdout: string; stderr: string }> {
  const ext = ["lazy_itable_init=1", "lazy_journal_init=1"];
  if (opts.rootOwner !== undefined) ext.push(`root_owner=${opts.rootOwner}:${opts.rootOwner}`);
  const seed = opts.seedDir ? ["-d", opts.seedDir] : [];
  return execFileP("mkfs.ext4", [
    "-q",
    "-F",
    "-m",
    "0",
    "-i",
    String(opts.bytesPerInode),
    "-E",
    ext.join(","),
    ...seed,
    file,
  ]);
}
