import { z } from "zod";
import { proxyConfigSchema } from "../../egress/index.ts";
import { REVISION_STATUSES } from "../rollout/revision-states.ts";
import { REPO_URL_RULE, repoUrlProblem } from "../build/repo-url.ts";

/** Sources of the real control plane. Only the buildable ones run on this platform's local driver. */
export const SOURCES = ["github", "external_docker", "internal_docker", "internal_source"] as const;
export type Source = (typeof SOURCES)[number];
export const BUILDABLE_SOURCES: ReadonlySet<string> = new Set(["github", "internal_source"]);

export const UUIDISH = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const idParam = z.string().regex(UUIDISH, "Input should be a valid UUID");

/** Names the platform sets itself for every agent server; a secret may not override them. */
export const RESERVED_SECRET_NAMES = new Set([
  "PATH",
  "PORT",
  "HOST",
  "NODE_OPTIONS",
  "NODE_PATH",
  "DATABASE_URL",
  "DATABASE_URI",
  "POSTGRES_URI",
  "HOME",
]);
const MAX_SECRET_VALUE_BYTES = 64 * 1024;

export const secretName = z
  .string()
  .regex(
    /^[A-Za-z_][A-Za-z0-9_]{0,127}$/,
    "Secret names are environment variable names: letters, digits and _, not starting with a digit, at most 128",
  )
  .refine(
    (n) => !RESERVED_SECRET_NAMES.has(n) && !n.startsWith("WHARF_"),
    "This name is set by the platform for every agent server and cannot be a secret",
  );
const secretValue = z
  .string()
  .refine(
    (v) => Buffer.byteLength(v) <= MAX_SECRET_VALUE_BYTES,
    `Secret values are at most ${MAX_SECRET_VALUE_BYTES} bytes`,
  );

export const deploymentName = z
  .string()
  .regex(
    /^[A-Za-z0-9][A-Za-z0-9 ._-]{0,127}$/,
    "Names are 1-128 characters: letters, digits, space, . _ - and start with a letter or digit",
  );

/** `dev_zero` is what today's `langgraph deploy` sends for its default "serverless" type; Wharf runs every type alike. */
const deploymentType = z.enum(["dev_free", "dev_zero", "dev", "prod"]);

export const sourceConfigSchema = z.object({
  integration_id: z.string().max(256).nullish(),
  /** Cloned over HTTP(S) only, through the egress address policy. */
  repo_url: z
    .string()
    .min(1)
    .max(2048)
    .refine((u) => repoUrlProblem(u) === null, REPO_URL_RULE)
    .nullish(),
  deployment_type: deploymentType.nullish(),
  build_on_push: z.boolean().nullish(),
  custom_url: z.string().max(2048).nullish(),
  resource_spec: z.record(z.string(), z.unknown()).nullish(),
  listener_id: z.string().max(256).nullish(),
  listener_config: z.record(z.string(), z.unknown()).nullish(),
  install_command: z.string().max(2000).nullish(),
  build_command: z.string().max(2000).nullish(),
  /** Wharf extension: a real stateless run of every graph with this `input` before DEPLOYED (opt-in). */
  smoke_input: z.record(z.string(), z.unknown()).nullish(),
});
export type SourceConfig = z.infer<typeof sourceConfigSchema>;

export const sourceRevisionConfigSchema = z.object({
  repo_ref: z.string().min(1).max(255).nullish(),
  langgraph_config_path: z.string().min(1).max(1024).nullish(),
  image_uri: z.string().max(2048).nullish(),
  source_tarball_path: z.string().min(1).max(1024).nullish(),
  /** Wharf extension: build from a folder on the platform's machine, under the operator's WHARF_DEPLOY_LOCAL_ROOTS. */
  local_path: z.string().min(1).max(4096).nullish(),
  /** Read-only; accepted and ignored so that a record can be sent back as a body. */
  repo_commit_sha: z.string().max(64).nullish(),
});
export type SourceRevisionConfig = z.infer<typeof sourceRevisionConfigSchema>;

const secretReference = z.object({ name: z.string(), secret_name: z.string(), secret_key: z.string() });

export const createDeploymentBody = z.object({
  name: deploymentName,
  source: z.enum(SOURCES),
  source_config: sourceConfigSchema,
  source_revision_config: sourceRevisionConfigSchema,
  secrets: z
    .array(z.object({ name: secretName, value: secretValue }))
    .max(100)
    .default([]),
  secret_references: z.array(secretReference).nullish(),
  /** Egress of the deployment's agent servers and build steps: the sandboxes' proxy_config. */
  proxy_config: proxyConfigSchema.nullish(),
});
export type CreateDeploymentBody = z.infer<typeof createDeploymentBody>;

export const patchDeploymentBody = z.object({
  revision_source: z.enum(SOURCES).nullish(),
  source_config: sourceConfigSchema.nullish(),
  source_revision_config: sourceRevisionConfigSchema.nullish(),
  /** The list replaces the set; `value: null` keeps the current value of that name. */
  secrets: z
    .array(z.object({ name: secretName, value: secretValue.nullable() }))
    .max(100)
    .nullish(),
  secret_references: z.array(secretReference).nullish(),
  tracked_packages: z.array(z.string()).nullish(),
  /** Replaces the egress rules of the running revision at once (no new revision); null = the default posture. */
  proxy_config: proxyConfigSchema.nullish(),
});
export type PatchDeploymentBody = z.infer<typeof patchDeploymentBody>;

const csv = z.string().max(10_000);
export const listDeploymentsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: z.coerce.number().int().min(0).default(0),
  name_contains: z.string().max(256).optional(),
  status: z.string().max(64).optional(),
  deployment_ids: csv.optional(),
  deployment_type: deploymentType.optional(),
});
export const listRevisionsQuery = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(20),
  offset: z.coerce.number().int().min(0).default(0),
  status: csv.optional(),
});
export const bulkDeleteQuery = z.object({ deployment_ids: z.union([csv, z.array(csv)]) });
export const logsQuery = z.object({
  offset: z.string().regex(UUIDISH, "Input should be an offset returned by a previous page").optional(),
  limit: z.coerce.number().int().min(1).max(1000).default(100),
  order: z.enum(["asc", "desc"]).default("asc"),
});

// Response shapes (for the OpenAPI document).
export const secretRecord = z.object({ name: z.string(), value: z.null() });
export const revisionRecord = z.object({
  id: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  status: z.enum(REVISION_STATUSES),
  source: z.string(),
  source_revision_config: z.record(z.string(), z.unknown()),
  status_message: z.string().nullable(),
});
export const deploymentRecord = z.object({
  id: z.string(),
  tenant_id: z.string(),
  name: z.string(),
  source: z.string(),
  source_config: z.record(z.string(), z.unknown()),
  source_revision_config: z.record(z.string(), z.unknown()),
  secrets: z.array(secretRecord),
  status: z.string(),
  latest_revision_id: z.string().nullable(),
  active_revision_id: z.string().nullable(),
  image_version: z.string().nullable(),
  proxy_config: z.record(z.string(), z.unknown()).nullable(),
  created_at: z.string(),
  updated_at: z.string(),
});
export const logsPage = z.object({
  logs: z.array(z.object({ id: z.string(), timestamp: z.string(), level: z.string(), message: z.string() })),
  next_offset: z.string().nullable(),
});
