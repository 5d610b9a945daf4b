import fs from "node:fs";
import path from "node:path";
import { isWithin } from "./local-roots.ts";

/**
 * Copies a source folder into a build without ever reading outside it: links are copied as links
 * (never followed) and a link that leads out of the folder fails the copy; only regular files are
 * read, opened without following a link and without blocking (a FIFO or device is skipped, never
 * opened); the number of files and their bytes are bounded. Asynchronous, so a large folder never
 * holds the platform's event loop.
 */
export class CopyRefused extends Error {}

export interface CopyOptions {
  /** Names skipped at any depth (installs, VCS data, Wharf's own state). */
  skipNames: ReadonlySet<string>;
  /** A folder never copied even when it is inside the tree (the platform's home), by identity. */
  skipDir: { dev: number; ino: number } | null;
  maxBytes: number;
  maxFiles: number;
  signal: AbortSignal;
  log(line: string): void;
}

const OPEN_FLAGS = fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW | fs.constants.O_NONBLOCK;
const CHUNK = 1 << 20;

/** Where a link points, relative to its own folder; throws when it leads out of `root`. */
async function linkTarget(src: string, root: string, rel: string): Promise<string> {
  const target = await fs.promises.readlink(src);
  const lexical = path.resolve(path.dirname(src), target);
  // The kernel's answer too: `a -> b/../x` with `b -> .` leaves the tree although it reads as
  // inside. A dangling link has no answer, so it may not climb at all.
  const real = await fs.promises.realpath(src).catch(() => null);
  const climbs = target.split("/").includes("..");
  if (!isWithin(lexical, root) || (real === null ? climbs : !isWithin(real, root)))
    throw new CopyRefused(`${rel} is a link that leaves the source folder (${target}): refusing to copy it`);
  return path.isAbsolute(target) ? path.relative(path.dirname(src), lexical) || "." : target;
}

async function copyFile(src: string, dest: string, expect: fs.Stats, budget: number, rel: string): Promise<number> {
  const input = await fs.promises.open(src, OPEN_FLAGS);
  try {
    const st = await input.stat();
    // Replaced between the listing and the open: whatever it is now, it is not what was checked.
    if (!st.isFile() || st.ino !== expect.ino || st.dev !== expect.dev)
      throw new CopyRefused(`${rel} changed while it was being copied`);
    const output = await fs.promises.open(
      dest,
      fs.constants.O_WRONLY | fs.constants.O_CREAT | fs.constants.O_EXCL | fs.constants.O_NOFOLLOW,
      st.mode & 0o777,
    );
    try {
      const buf = Buffer.allocUnsafe(CHUNK);
      let copied = 0;
      for (;;) {
        const { bytesRead } = await input.read(buf, 0, CHUNK, null);
        if (bytesRead === 0) return copied;
        copied += bytesRead;
        if (copied > budget)
          throw new CopyRefused(`the source folder is larger than the limit (WHARF_UPLOAD_LIMIT_BYTES) at ${rel}`);
        await output.write(buf, 0, bytesRead);
      }
    } finally {
      await output.close();
    }
  } finally {
    await input.close();
  }
}

/** Copies `from` (an absolute, resolved folder) into the new folder `to`. */
export async function copyTree(from: string, to: string, opts: CopyOptions): Promise<{ files: number; bytes: number }> {
  let files = 0;
  let bytes = 0;
  await fs.promises.mkdir(to, { recursive: true, mode: 0o755 });
  const pending: string[] = [""];
  while (pending.length) {
    const relDir = pending.pop()!;
    const dir = await fs.promises.opendir(path.join(from, relDir));
    for await (const entry of dir) {
      opts.signal.throwIfAborted();
      if (opts.skipNames.has(entry.name)) continue;
      const rel = path.join(relDir, entry.name);
      const src = path.join(from, rel);
      const dest = path.join(to, rel);
      const st = await fs.promises.lstat(src);
      if (st.isSymbolicLink()) {
        await fs.promises.symlink(await linkTarget(src, from, rel), dest);
      } else if (st.isDirectory()) {
        if (opts.skipDir && st.dev === opts.skipDir.dev && st.ino === opts.skipDir.ino) continue;
        await fs.promises.mkdir(dest, { mode: (st.mode & 0o777) | 0o700 });
        pending.push(rel);
      } else if (st.isFile()) {
        if (++files > opts.maxFiles) throw new CopyRefused(`the source folder has more than ${opts.maxFiles} files`);
        bytes += await copyFile(src, dest, st, opts.maxBytes - bytes, rel);
      } else {
        opts.log(`skipped ${rel} (not a regular file)`);
      }
    }
  }
  return { files, bytes };
}
