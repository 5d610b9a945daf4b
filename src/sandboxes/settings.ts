import path from "node:path";
import { z } from "zod";
import { readSetting } from "../config/index.ts";
import type { AdmissionLimits } from "./admission.ts";

/** Sandbox settings, read from the environment once (the platform's own config stays generic). */
export interface SandboxSettings {
  /** `local` (this host, bubblewrap) or `none` (the API answers 503 for anything that needs a runtime). */
  driver: "local" | "none";
  stateDir: string;
  baseCacheDir: string;
  hostUid: number;
  pidsMax: number;
  /** `image` (default): an ext4 image per sandbox enforces fs_capacity_bytes; `dir`: a directory (per-file limit only). */
  disk: "dir" | "image";
  /** How long one "second" of idle_ttl_seconds / delete_after_stop_seconds lasts (tests shorten it). */
  ttlSecondMs: number;
  tickMs: number;
  provisionDeadlineMs: number;
  deleteDeadlineMs: number;
  /**
   * Keep sandboxes running when the platform shuts down gracefully, to be re-adopted by the next
   * start (live restore). Off by default: a graceful stop stops them (files kept), so nothing is
   * left running if the state folder goes away. After a crash they keep running either way and
   * the next start re-adopts them.
   */
  keepRunning: boolean;
  /** Largest output kept per stream and command, in bytes. */
  maxOutputBytes: number;
  /** Sandboxes kept half-started (everything but the egress attach) so a create takes one at once. */
  warmPool: number;
  /** Admission (see admission.ts): overcommit factors of the host and each workspace's quotas. */
  admission: AdmissionLimits;
}

const env = z.object({
  WHARF_SANDBOX_DRIVER: z.enum(["local", "none"]).default("local"),
  WHARF_SANDBOX_DISK: z.enum(["dir", "image"]).default("image"),
  WHARF_SANDBOX_BASE_CACHE: z.string().min(1).optional(),
  WHARF_SANDBOX_HOST_UID: z.coerce.number().int().min(1000).max(2 ** 31 - 2).default(200000),
  WHARF_SANDBOX_PIDS_MAX: z.coerce.number().int().min(16).default(1024),
  WHARF_SANDBOX_TTL_SECOND_MS: z.coerce.number().int().min(1).default(1000),
  WHARF_SANDBOX_TICK_MS: z.coerce.number().int().min(10).default(5000),
  WHARF_SANDBOX_PROVISION_DEADLINE_MS: z.coerce.number().int().min(100).default(120_000),
  WHARF_SANDBOX_KEEP_RUNNING: z.enum(["0", "1", "true", "false"]).default("0"),
  WHARF_SANDBOX_MAX_OUTPUT_BYTES: z.coerce.number().int().min(1024).default(64 << 20),
  WHARF_SANDBOX_WARM_POOL: z.coerce.number().int().min(0).max(64).default(2),
});

export function loadSandboxSettings(home: string, source: NodeJS.ProcessEnv = process.env): SandboxSettings {
  const parsed = env.safeParse(Object.fromEntries(Object.entries(source).filter(([k, v]) => k.startsWith("WHARF_SANDBOX_") && v !== "")));
  if (!parsed.success) throw new Error(`invalid sandbox configuration: ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
  const e = parsed.data;
  const stateDir = path.join(home, "sandboxes");
  return {
    driver: e.WHARF_SANDBOX_DRIVER,
    disk: e.WHARF_SANDBOX_DISK,
    stateDir,
    baseCacheDir: e.WHARF_SANDBOX_BASE_CACHE ? path.resolve(e.WHARF_SANDBOX_BASE_CACHE) : path.join(stateDir, "images"),
    hostUid: e.WHARF_SANDBOX_HOST_UID,
    pidsMax: e.WHARF_SANDBOX_PIDS_MAX,
    ttlSecondMs: e.WHARF_SANDBOX_TTL_SECOND_MS,
    tickMs: e.WHARF_SANDBOX_TICK_MS,
    provisionDeadlineMs: e.WHARF_SANDBOX_PROVISION_DEADLINE_MS,
    deleteDeadlineMs: 60_000,
    keepRunning: e.WHARF_SANDBOX_KEEP_RUNNING === "1" || e.WHARF_SANDBOX_KEEP_RUNNING === "true",
    maxOutputBytes: e.WHARF_SANDBOX_MAX_OUTPUT_BYTES,
    warmPool: e.WHARF_SANDBOX_WARM_POOL,
    // Declared (parsed, defaulted) once in the platform's settings.
    admission: {
      memoryOvercommit: readSetting("WHARF_SANDBOX_MEMORY_OVERCOMMIT", source),
      diskOvercommit: readSetting("WHARF_SANDBOX_DISK_OVERCOMMIT", source),
      workspaceMaxSandboxes: readSetting("WHARF_SANDBOX_WORKSPACE_MAX_SANDBOXES", source),
      workspaceMaxMemBytes: readSetting("WHARF_SANDBOX_WORKSPACE_MAX_MEM_BYTES", source),
      workspaceMaxDiskBytes: readSetting("WHARF_SANDBOX_WORKSPACE_MAX_DISK_BYTES", source),
    },
  };
}
