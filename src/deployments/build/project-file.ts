import fs from "node:fs";
import path from "node:path";

/**
 * Reading a project's files on the platform's machine, as root, from a tree the project's own
 * code writes (its source, its install and build commands). Such a file may be a FIFO (an open
 * that never returns and blocks every workspace), a link to `/dev/zero` (a read that never ends),
 * a link to a host file (root reads it for the project), or huge. So: no link anywhere below the
 * build's root, an open that cannot block, a regular file only, and a size cap.
 */

export class ProjectFileError extends Error {}

/** Cap for the small files the platform reads (langgraph.json, package.json, .npmrc). */
export const PROJECT_FILE_MAX = 4 * 1024 * 1024;
/** Cap for lockfiles, which are large in large projects. */
export const LOCKFILE_MAX = 64 * 1024 * 1024;

const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;

/**
 * The file `rel` of the tree at `root` (a folder of the platform's), or null when it does not
 * exist. `rel` is shown in errors (it is the project's own name for the file, never a host path).
 */
export function readProjectFile(root: string, rel: string, maxBytes = PROJECT_FILE_MAX): string | null {
  const file = path.resolve(root, rel);
  if (!file.startsWith(path.resolve(root) + path.sep)) throw new ProjectFileError(`${rel} is outside the project`);
  // Every folder on the way must be a real folder: O_NOFOLLOW guards the last component only.
  let dir = path.resolve(root);
  for (const part of path.relative(root, path.dirname(file)).split(path.sep).filter(Boolean)) {
    dir = path.join(dir, part);
    let st: fs.Stats;
    try {
      st = fs.lstatSync(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
      throw new ProjectFileError(`${rel} cannot be read: ${(err as Error).message}`, { cause: err });
    }
    if (st.isSymbolicLink())
      throw new ProjectFileError(`${rel} is below a symbolic link (${path.relative(root, dir)}); refusing to read it`);
    if (!st.isDirectory()) return null;
  }
  let fd: number;
  try {
    fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return null;
    if (code === "ELOOP") throw new ProjectFileError(`${rel} is a symbolic link; refusing to read it`, { cause: err });
    throw new ProjectFileError(`${rel} cannot be read: ${(err as Error).message}`, { cause: err });
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new ProjectFileError(`${rel} is not a regular file (${kindOf(st)}); refusing to read it`);
    if (st.size > maxBytes) throw new ProjectFileError(`${rel} is larger than ${maxBytes} bytes`);
    // Read one byte more than allowed: a file that grows meanwhile is caught too.
    const buf = Buffer.alloc(Math.min(st.size, maxBytes) + 1);
    let n = 0;
    for (let r; n < buf.length && (r = fs.readSync(fd, buf, n, buf.length - n, null)) > 0;) n += r;
    if (n > maxBytes) throw new ProjectFileError(`${rel} is larger than ${maxBytes} bytes`);
    return buf.subarray(0, n).toString("utf8");
  } finally {
    fs.closeSync(fd);
  }
}

function kindOf(st: fs.Stats): string {
  if (st.isFIFO()) return "a FIFO";
  if (st.isDirectory()) return "a folder";
  if (st.isCharacterDevice() || st.isBlockDevice()) return "a device";
  if (st.isSocket()) return "a socket";
  return "not a file";
}
