import fs from "node:fs";
import path from "node:path";
import type { Kysely } from "kysely";
import type { Database } from "../../store/schema.ts";
import type { DeploymentsLayout } from "../layout.ts";
import { TERMINAL_STATUSES } from "../rollout/revision-states.ts";

/**
 * Bounds on a workspace's uploaded tarballs (each up to WHARF_UPLOAD_LIMIT_BYTES): how many it may
 * keep and their total size, and the expiry of those nothing uses any more.
 */
export interface UploadLimits {
  maxCount: number;
  maxBytes: number;
  /** An upload no deployment or unfinished revision names is removed once this old. */
  ttlMs: number;
}

export class UploadQuotaExceeded extends Error {}

/** Bytes being written right now, per workspace folder: concurrent uploads share the room. */
const inflight = new Map<string, number>();

/** A folder's entries; none when it does not exist (yet) or is not a folder. */
function entries(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return []; // nothing uploaded there yet
  }
}

/** What a workspace's uploads folder holds: finished tarballs and their bytes (partial files count as bytes). */
function usage(dir: string): { count: number; bytes: number } {
  let count = 0;
  let bytes = 0;
  for (const name of entries(dir)) {
    const st = fs.lstatSync(path.join(dir, name), { throwIfNoEntry: false });
    if (!st?.isFile()) continue;
    if (name.endsWith(".tar.gz")) count++;
    bytes += st.size;
  }
  return { count, bytes };
}

/**
 * Admits one upload into `dir` (a workspace's folder): refuses at once past the count, and returns
 * a counter to call with each chunk, which throws once the workspace's bytes would pass the total.
 * `release` gives the bytes back to the in-flight tally once the file is written or dropped.
 */
export function admitUpload(dir: string, limits: UploadLimits): { add(bytes: number): void; release(): void } {
  const now = usage(dir);
  if (now.count >= limits.maxCount) {
    throw new UploadQuotaExceeded(
      `this workspace keeps ${now.count} uploaded tarballs, the most it may (WHARF_DEPLOYMENT_UPLOADS_MAX); unused ones expire after ${Math.round(limits.ttlMs / 3_600_000)} h`,
    );
  }
  let mine = 0;
  return {
    add(bytes) {
      const others = inflight.get(dir) ?? 0;
      if (now.bytes + others + bytes > limits.maxBytes) {
        throw new UploadQuotaExceeded(
          `this workspace's uploaded tarballs would pass ${limits.maxBytes} bytes in all (WHARF_DEPLOYMENT_UPLOADS_MAX_BYTES); unused ones expire after ${Math.round(limits.ttlMs / 3_600_000)} h`,
        );
      }
      mine += bytes;
      inflight.set(dir, others + bytes);
    },
    release() {
      const left = (inflight.get(dir) ?? 0) - mine;
      if (left > 0) inflight.set(dir, left);
      else inflight.delete(dir);
      mine = 0;
    },
  };
}

/** Object paths a deployment's current config or a revision still to be built names. */
async function uploadsInUse(db: Kysely<Database>): Promise<Set<string>> {
  const configs = [
    ...(await db.selectFrom("deployments").select("source_revision_config").execute()),
    ...(await db
      .selectFrom("deployment_revisions")
      .select("source_revision_config")
      .where("status", "not in", [...TERMINAL_STATUSES])
      .execute()),
  ];
  const used = new Set<string>();
  for (const c of configs) {
    try {
      const p = (JSON.parse(c.source_revision_config) as { source_tarball_path?: unknown }).source_tarball_path;
      if (typeof p === "string") used.add(p);
    } catch {
      // A config that does not parse names nothing.
    }
  }
  return used;
}

/**
 * Removes uploads older than the TTL that nothing uses, and partial files a crash left (a live
 * upload's file is written to all the time). Returns how many files went.
 */
export async function sweepUploads(
  db: Kysely<Database>,
  layout: DeploymentsLayout,
  ttlMs: number,
  now = Date.now(),
): Promise<number> {
  const workspaces = entries(layout.uploads);
  if (workspaces.length === 0) return 0;
  const used = await uploadsInUse(db);
  let removed = 0;
  for (const ws of workspaces) {
    const dir = path.join(layout.uploads, ws);
    for (const name of entries(dir)) {
      const file = path.join(dir, name);
      const st = fs.lstatSync(file, { throwIfNoEntry: false });
      if (!st?.isFile() || now - st.mtimeMs < ttlMs) continue;
      if (name.endsWith(".tar.gz") && used.has(`uploads/${ws}/${name}`)) continue;
      fs.rmSync(file, { force: true });
      removed++;
    }
  }
  return removed;
}
