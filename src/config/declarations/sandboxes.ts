import { z } from "zod";
import { decl, int, flag, text } from "./declare.ts";

/** The settings of sandboxes. */
export const SANDBOX_SETTINGS = {
  WHARF_SANDBOX_DRIVER: decl({
    part: "sandboxes",
    type: "enum",
    default: "local",
    description: "`local` (Linux namespaces) or `none` (sandbox calls answer 503)",
    schema: z.enum(["local", "none"]),
  }),
  WHARF_SANDBOX_DISK: decl({
    part: "sandboxes",
    type: "enum",
    default: "image",
    description:
      "`image`: an ext4 image per sandbox with a hard `fs_capacity_bytes`; `dir`: a directory (per-file limit only)",
    schema: z.enum(["dir", "image"]),
  }),
  WHARF_SANDBOX_BASE_CACHE: decl({
    part: "sandboxes",
    type: "path",
    defaultText: "`$WHARF_HOME/sandboxes/images`",
    description: "cache of the base image assembled from host packages",
    schema: text().optional(),
  }),
  WHARF_SANDBOX_HOST_UID: decl({
    part: "sandboxes",
    type: "uid",
    default: "200000",
    description: "unprivileged host uid sandbox processes run as",
    schema: int(1000, 2 ** 31 - 2),
  }),
  WHARF_SANDBOX_PIDS_MAX: decl({
    part: "sandboxes",
    type: "integer",
    default: "1024",
    description: "process limit per sandbox",
    schema: int(16),
  }),
  WHARF_SANDBOX_TTL_SECOND_MS: decl({
    part: "sandboxes",
    type: "ms",
    default: "1000",
    description: "length of one second of sandbox TTLs (tests shorten it)",
    schema: int(1),
  }),
  WHARF_SANDBOX_TICK_MS: decl({
    part: "sandboxes",
    type: "ms",
    default: "5000",
    description: "period of the lifecycle loop (idle stop, deadlines, deletion)",
    schema: int(10),
  }),
  WHARF_SANDBOX_PROVISION_DEADLINE_MS: decl({
    part: "sandboxes",
    type: "ms",
    default: "120000",
    description: "a sandbox still provisioning after this fails",
    schema: int(100),
  }),
  WHARF_SANDBOX_KEEP_RUNNING: decl({
    part: "sandboxes",
    type: "0/1",
    default: "0",
    description: "keep sandboxes running across a graceful restart (live restore)",
    schema: flag(),
  }),
  WHARF_SANDBOX_WARM_POOL: decl({
    part: "sandboxes",
    type: "integer",
    default: "2",
    description: "sandboxes kept half-started so a create with default resources takes one at once (0 = off)",
    schema: int(0, 64),
  }),
  WHARF_SANDBOX_DOWNLOAD_LINK_TTL_SECONDS: decl({
    part: "sandboxes",
    type: "seconds",
    default: "3600",
    description:
      "lifetime of a download link whose request names no `expires_in_seconds` (0: such links never expire, as on LangSmith)",
    schema: int(0, 10 * 365 * 24 * 3600),
  }),
  WHARF_SANDBOX_MAX_OUTPUT_BYTES: decl({
    part: "sandboxes",
    type: "bytes",
    default: String(64 << 20),
    description: "output kept per command stream for re-attaching clients",
    schema: int(1024),
  }),
  WHARF_SANDBOX_MEMORY_OVERCOMMIT: decl({
    part: "sandboxes",
    type: "factor",
    default: "2",
    description:
      "running sandboxes' mem_bytes may add up to this many times the host's memory (503 beyond); one sandbox never more than the memory itself (422)",
    schema: z.coerce.number().min(0.01).max(100),
  }),
  WHARF_SANDBOX_DISK_OVERCOMMIT: decl({
    part: "sandboxes",
    type: "factor",
    default: "1",
    description:
      "what sandbox disks may still grow by, in all, may be this many times the free space of `$WHARF_HOME/sandboxes` (422 for one disk beyond it, 503 for the sum)",
    schema: z.coerce.number().min(0.01).max(100),
  }),
  WHARF_SANDBOX_WORKSPACE_MAX_SANDBOXES: decl({
    part: "sandboxes",
    type: "integer",
    default: "100",
    description: "sandboxes one workspace may have, whatever their state (429 beyond)",
    schema: int(1),
  }),
  WHARF_SANDBOX_WORKSPACE_MAX_MEM_BYTES: decl({
    part: "sandboxes",
    type: "bytes",
    default: String(64 * 1024 ** 3),
    description: "mem_bytes one workspace's running sandboxes may hold in all (429 beyond)",
    schema: int(64 << 20),
  }),
  WHARF_SANDBOX_WORKSPACE_MAX_DISK_BYTES: decl({
    part: "sandboxes",
    type: "bytes",
    default: String(512 * 1024 ** 3),
    description: "fs_capacity_bytes one workspace's sandboxes may have in all (429 beyond)",
    schema: int(64 << 20),
  }),
} as const;
