import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { promisify } from "node:util";
import { isAlive } from "../../../confinement/index.ts";
import { liveUpper, withImageMounted } from "./filesystem.ts";
import { imagePath, type LocalHost } from "./host.ts";
import type { LocalRef } from "./ref.ts";

const execFileP = promisify(execFile);

export async function snapshot(
  host: LocalHost,
  id: string,
  archivePath: string,
  r: LocalRef | null,
): Promise<{ sizeBytes: number; usedBytes: number }> {
  fs.mkdirSync(path.dirname(archivePath), { recursive: true, mode: 0o700 });
  const tmp = `${archivePath}.part`;
  // Whiteouts (0/0 character devices) and opaque-directory xattrs are what make a layer a layer: keep them.
  const write = async (upper: string): Promise<number> => {
    if (!fs.existsSync(upper)) throw new Error("the sandbox has no filesystem");
    await execFileP(
      "tar",
      [
        "--zstd",
        "-c",
        "--numeric-owner",
        "--xattrs",
        "--xattrs-include=trusted.overlay.*",
        "-f",
        tmp,
        "-C",
        upper,
        ".",
      ],
      { maxBuffer: 1 << 20 },
    );
    const { stdout } = await execFileP("du", ["-sb", upper]);
    return Number(stdout.split("\t")[0]) || 0;
  };
  let used: number;
  if (host.opts.diskImages && !(r && isAlive(r.holder)))
    used = await withImageMounted(imagePath(host, id), true, (root) => write(path.join(root, "upper")));
  else used = await write(liveUpper(host, id, r?.holder.pid ?? null));
  fs.renameSync(tmp, archivePath);
  return { sizeBytes: fs.statSync(archivePath).size, usedBytes: used };
}
