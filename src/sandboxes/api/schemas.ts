import { z } from "zod";
import { proxyConfigSchema } from "../../egress/index.ts";

/** `error`: the replica that ran it stopped renewing its lease (replica mode); it can only be deleted. */
export const SANDBOX_STATUSES = ["provisioning", "ready", "stopped", "failed", "error", "deleting"] as const;
export type SandboxStatus = (typeof SANDBOX_STATUSES)[number];

const GiB = 1024 ** 3;
export const DEFAULTS = {
  vcpus: 1,
  memBytes: 2 * GiB,
  fsCapacityBytes: 10 * GiB,
  idleTtlSeconds: 600,
  deleteAfterStopSeconds: 14 * 24 * 3600,
};

export const sandboxName = z
  .string()
  .regex(
    /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/,
    "Sandbox names are 1-63 characters: lowercase letters, digits and '-', starting and ending with a letter or digit",
  );

const multipleOf60 = (field: string) =>
  z
    .number()
    .int()
    .min(0)
    .max(10 * 365 * 24 * 3600)
    .refine((v) => v % 60 === 0, `${field} must be a multiple of 60 (0 disables it)`);

/** Commands get their environment as exec arguments: keep it well inside the kernel's 2 MiB. */
export const MAX_ENV_BYTES = 256 * 1024;
export const envVars = z
  .record(
    z
      .string()
      .regex(
        /^[A-Za-z_][A-Za-z0-9_]{0,255}$/,
        "Environment variable names are letters, digits and '_', not starting with a digit",
      ),
    z.string().max(100 * 1024),
  )
  .refine((r) => Object.keys(r).length <= 256, "At most 256 environment variables")
  .refine(
    (r) => Object.entries(r).reduce((n, [k, v]) => n + k.length + Buffer.byteLength(v) + 2, 0) <= MAX_ENV_BYTES,
    `Environment variables total at most ${MAX_ENV_BYTES} bytes`,
  );
const labels = z
  .record(
    z
      .string()
      .min(1)
      .max(63)
      .regex(/^[A-Za-z0-9._/-]+$/, "Label keys are letters, digits and . _ / -"),
    z.string().max(255),
  )
  .refine((r) => Object.keys(r).length <= 64, "At most 64 labels");

const resources = {
  vcpus: z.number().int().min(1).max(64).optional(),
  cpu_millicores: z.number().int().min(100).max(64_000).optional(),
  mem_bytes: z
    .number()
    .int()
    .min(64 * 1024 ** 2)
    .max(64 * GiB)
    .optional(),
  fs_capacity_bytes: z
    .number()
    .int()
    .min(64 * 1024 ** 2)
    .max(1024 * GiB)
    .optional(),
};

export const createBody = z
  .object({
    name: sandboxName.optional(),
    snapshot_id: z.string().min(1).max(100).optional(),
    snapshot_name: z.string().min(1).max(200).optional(),
    snapshot: z.string().min(1).max(200).optional(),
    wait_for_ready: z.boolean().default(true),
    timeout: z.number().min(0).max(3600).default(30),
    ...resources,
    idle_ttl_seconds: multipleOf60("idle_ttl_seconds").optional(),
    delete_after_stop_seconds: multipleOf60("delete_after_stop_seconds").optional(),
    env_vars: envVars.optional(),
    labels: labels.optional(),
    tag_value_ids: z.array(z.string()).optional(),
    proxy_config: proxyConfigSchema.nullable().optional(),
  })
  .superRefine((b, ctx) => {
    if (b.snapshot_id && (b.snapshot_name || b.snapshot))
      ctx.addIssue({
        code: "custom",
        path: ["snapshot_name"],
        message: "Give at most one of snapshot_id and snapshot_name",
      });
  });
export type CreateBody = z.infer<typeof createBody>;

export const patchBody = z.object({
  name: sandboxName.optional(),
  ...resources,
  idle_ttl_seconds: multipleOf60("idle_ttl_seconds").optional(),
  delete_after_stop_seconds: multipleOf60("delete_after_stop_seconds").optional(),
  labels: labels.optional(),
  tag_value_ids: z.array(z.string()).optional(),
  proxy_config: proxyConfigSchema.nullable().optional(),
});
export type PatchBody = z.infer<typeof patchBody>;

const one = <T extends z.ZodTypeAny>(t: T) => z.preprocess((v) => (Array.isArray(v) ? v[v.length - 1] : v), t);
export const listQuery = z.object({
  status: one(z.enum(SANDBOX_STATUSES)).optional(),
  label: z.union([z.string(), z.array(z.string())]).optional(),
  name_contains: one(z.string().max(200)).optional(),
  created_by: one(z.literal("me")).optional(),
  sort_by: one(z.enum(["name", "status", "created_at"])).default("created_at"),
  sort_direction: one(z.enum(["asc", "desc"])).default("desc"),
  limit: one(z.coerce.number().int().min(1).max(500)).default(50),
  offset: one(z.coerce.number().int().min(0)).default(0),
});

export const snapshotBody = z.object({
  name: z
    .string()
    .regex(
      /^[a-z0-9]([a-z0-9._-]{0,98}[a-z0-9])?$/,
      "Snapshot names are 1-100 characters: lowercase letters, digits, '.', '_' and '-'",
    ),
  tag: z
    .string()
    .regex(/^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$/)
    .default("latest"),
  labels: labels.optional(),
  checkpoint: z.unknown().optional(),
  include_memory: z.literal(false).optional(),
  fs_capacity_bytes: resources.fs_capacity_bytes,
});

export const snapshotListQuery = z.object({
  name_contains: one(z.string().max(200)).optional(),
  limit: one(z.coerce.number().int().min(1).max(500)).default(50),
  offset: one(z.coerce.number().int().min(0)).default(0),
});

/** `{name}` path segments: a sandbox name or id. */
export const boxParams = z.object({ name: z.string().min(1).max(200) });
