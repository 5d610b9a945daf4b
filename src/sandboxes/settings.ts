import path from "node:path";
import { readSetting, SETTINGS, type Settings } from "../config/index.ts";
import type { AdmissionLimits } from "./lifecycle/admission.ts";

/** Sandbox settings: what the declared WHARF_SANDBOX_* settings mean for the sandboxes. */
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

/** The declared settings sandboxes read (src/config/settings.ts parses and defaults each once). */
type SandboxDeclared = Pick<
  Settings,
  | "WHARF_SANDBOX_DRIVER"
  | "WHARF_SANDBOX_DISK"
  | "WHARF_SANDBOX_BASE_CACHE"
  | "WHARF_SANDBOX_HOST_UID"
  | "WHARF_SANDBOX_PIDS_MAX"
  | "WHARF_SANDBOX_TTL_SECOND_MS"
  | "WHARF_SANDBOX_TICK_MS"
  | "WHARF_SANDBOX_PROVISION_DEADLINE_MS"
  | "WHARF_SANDBOX_KEEP_RUNNING"
  | "WHARF_SANDBOX_MAX_OUTPUT_BYTES"
  | "WHARF_SANDBOX_WARM_POOL"
  | "WHARF_SANDBOX_MEMORY_OVERCOMMIT"
  | "WHARF_SANDBOX_DISK_OVERCOMMIT"
  | "WHARF_SANDBOX_WORKSPACE_MAX_SANDBOXES"
  | "WHARF_SANDBOX_WORKSPACE_MAX_MEM_BYTES"
  | "WHARF_SANDBOX_WORKSPACE_MAX_DISK_BYTES"
>;

/** Sandbox settings from the platform's declared settings (`ctx.config.settings`): a pure mapping. */
export function sandboxSettingsFrom(s: SandboxDeclared, home: string): SandboxSettings {
  const stateDir = path.join(home, "sandboxes");
  return {
    driver: s.WHARF_SANDBOX_DRIVER,
    disk: s.WHARF_SANDBOX_DISK,
    stateDir,
    baseCacheDir: s.WHARF_SANDBOX_BASE_CACHE ? path.resolve(s.WHARF_SANDBOX_BASE_CACHE) : path.join(stateDir, "images"),
    hostUid: s.WHARF_SANDBOX_HOST_UID,
    pidsMax: s.WHARF_SANDBOX_PIDS_MAX,
    ttlSecondMs: s.WHARF_SANDBOX_TTL_SECOND_MS,
    tickMs: s.WHARF_SANDBOX_TICK_MS,
    provisionDeadlineMs: s.WHARF_SANDBOX_PROVISION_DEADLINE_MS,
    deleteDeadlineMs: 60_000,
    keepRunning: s.WHARF_SANDBOX_KEEP_RUNNING,
    maxOutputBytes: s.WHARF_SANDBOX_MAX_OUTPUT_BYTES,
    warmPool: s.WHARF_SANDBOX_WARM_POOL,
    admission: {
      memoryOvercommit: s.WHARF_SANDBOX_MEMORY_OVERCOMMIT,
      diskOvercommit: s.WHARF_SANDBOX_DISK_OVERCOMMIT,
      workspaceMaxSandboxes: s.WHARF_SANDBOX_WORKSPACE_MAX_SANDBOXES,
      workspaceMaxMemBytes: s.WHARF_SANDBOX_WORKSPACE_MAX_MEM_BYTES,
      workspaceMaxDiskBytes: s.WHARF_SANDBOX_WORKSPACE_MAX_DISK_BYTES,
    },
  };
}

/**
 * The same from a variable set of a test's own (`createSandboxesFeature(env)`), each variable parsed
 * by its declaration; the platform itself uses `sandboxSettingsFrom(ctx.config.settings, …)`.
 */
export function loadSandboxSettings(home: string, source: Record<string, string | undefined>): SandboxSettings {
  const names = Object.keys(SETTINGS).filter((k) => k.startsWith("WHARF_SANDBOX_")) as Array<keyof SandboxDeclared>;
  const declared = Object.fromEntries(names.map((n) => [n, readSetting(n, source)])) as unknown as SandboxDeclared;
  return sandboxSettingsFrom(declared, home);
}
