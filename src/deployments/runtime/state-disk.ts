import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { formatExt4 } from "../../confinement/index.ts";

/** The deployment's state folder's disk image, inside the state folder on the host. */
export const STATE_IMAGE = "disk.img";

/**
 * A deployment's state folder as an ext4 image of `bytes` (sparse), which its confined servers
 * loop-mount in their own mount namespace and see as `/state`: a full disk is ENOSPC there and
 * nothing else, as a sandbox's disk. Made on the first confined start, owned by the deployment's uid
 * (`root_owner`), with whatever the folder held before (a state folder of an earlier version, such as
 * its SQLite database) copied in by `mkfs -d` and then removed from the host folder. Never mounted on
 * the host. Made aside and linked into place: two starts racing make one image, and a server never
 * mounts half a file. An image keeps its size when the setting changes later.
 */
export async function ensureStateImage(stateDir: string, uid: number, bytes: number): Promise<string> {
  const image = path.join(stateDir, STATE_IMAGE);
  if (fs.existsSync(image)) return image;
  const before = fs.readdirSync(stateDir).filter((n) => n !== STATE_IMAGE);
  const tmp = path.join(
    path.dirname(stateDir),
    `.${path.basename(stateDir)}.${crypto.randomBytes(6).toString("hex")}.img`,
  );
  try {
    fs.closeSync(fs.openSync(tmp, "wx", 0o600));
    fs.truncateSync(tmp, bytes);
    await formatExt4(tmp, {
      bytesPerInode: 16384,
      rootOwner: uid,
      seedDir: before.length ? stateDir : undefined,
    }).catch((err: Error & { stderr?: string }) => {
      throw new Error(
        `the deployment's state disk could not be made${before.length ? " (does its state folder fit WHARF_DEPLOYMENT_STATE_BYTES?)" : ""}: ${(err.stderr || err.message).trim().slice(0, 300)}`,
        { cause: err },
      );
    });
    try {
      fs.linkSync(tmp, image);
    } catch (err) {
      // Another start made it first: that one is the deployment's disk.
      if ((err as NodeJS.ErrnoException).code !== "EEXIST") throw err;
      return image;
    }
  } finally {
    fs.rmSync(tmp, { force: true });
  }
  for (const name of before) fs.rmSync(path.join(stateDir, name), { recursive: true, force: true });
  return image;
}
