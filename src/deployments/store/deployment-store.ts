import type { Kysely } from "kysely";
import type { Database } from "../../store/schema.ts";
import type { DeploymentRevisionsTable, DeploymentsTable } from "./deployments-tables.ts";
import type { RevisionStatus } from "../rollout/revision-states.ts";
import "./deployments-tables.ts";

/** The revision fields of the real API, in its order, plus Wharf's `local_path` when used. */
export function revisionConfigOut(stored: Record<string, unknown>, commitSha: string | null): Record<string, unknown> {
  const out: Record<string, unknown> = {
    repo_ref: stored.repo_ref ?? null,
    langgraph_config_path: stored.langgraph_config_path ?? null,
    image_uri: stored.image_uri ?? null,
    source_tarball_path: stored.source_tarball_path ?? null,
    repo_commit_sha: commitSha,
  };
  if (stored.local_path) out.local_path = stored.local_path;
  return out;
}

export function toRevisionRecord(row: DeploymentRevisionsTable) {
  return {
    id: row.id,
    created_at: row.created_at,
    updated_at: row.updated_at,
    status: row.status as RevisionStatus,
    source: row.source,
    source_revision_config: revisionConfigOut(JSON.parse(row.source_revision_config), row.repo_commit_sha),
    status_message: row.status_message,
  };
}

/** The stable URL of a deployment: the platform's base URL and the deployment's id. */
export const customUrl = (baseUrl: string, deploymentId: string) => `${baseUrl}/deployments/${deploymentId}`;

const SOURCE_CONFIG_KEYS = [
  "integration_id",
  "repo_url",
  "deployment_type",
  "build_on_push",
  "custom_url",
  "resource_spec",
  "listener_id",
  "listener_config",
  "install_command",
  "build_command",
  "smoke_input",
];

/**
 * The Deployment record of the real API. Secret values are never returned: each secret reads
 * `{"name": …, "value": null}` (null, not a mask, so that a mask can never be mistaken for a value).
 */
export function toDeploymentRecord(row: DeploymentsTable, baseUrl: string, latestCommitSha: string | null) {
  const stored = JSON.parse(row.source_config) as Record<string, unknown>;
  const sourceConfig: Record<string, unknown> = {};
  for (const k of SOURCE_CONFIG_KEYS) sourceConfig[k] = stored[k] ?? null;
  sourceConfig.custom_url = customUrl(baseUrl, row.id);
  return {
    id: row.id,
    tenant_id: row.workspace_id,
    name: row.name,
    source: row.source,
    source_config: sourceConfig,
    source_revision_config: revisionConfigOut(JSON.parse(row.source_revision_config), latestCommitSha),
    secrets: (JSON.parse(row.secret_names) as string[]).map((name) => ({ name, value: null })),
    status: row.status,
    latest_revision_id: row.latest_revision_id,
    active_revision_id: row.active_revision_id,
    image_version: null,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}

export async function getDeploymentRow(
  db: Kysely<Database>,
  workspaceId: string,
  id: string,
): Promise<DeploymentsTable | undefined> {
  return db
    .selectFrom("deployments")
    .selectAll()
    .where("id", "=", id)
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
}

export async function getRevisionRow(
  db: Kysely<Database>,
  workspaceId: string,
  deploymentId: string,
  revisionId: string,
): Promise<DeploymentRevisionsTable | undefined> {
  return db
    .selectFrom("deployment_revisions")
    .selectAll()
    .where("id", "=", revisionId)
    .where("deployment_id", "=", deploymentId)
    .where("workspace_id", "=", workspaceId)
    .executeTakeFirst();
}

export async function latestCommitSha(db: Kysely<Database>, row: DeploymentsTable): Promise<string | null> {
  if (!row.latest_revision_id) return null;
  const r = await db
    .selectFrom("deployment_revisions")
    .select("repo_commit_sha")
    .where("id", "=", row.latest_revision_id)
    .executeTakeFirst();
  return r?.repo_commit_sha ?? null;
}

export async function listDeploymentRows(
  db: Kysely<Database>,
  workspaceId: string,
  q: {
    limit: number;
    offset: number;
    name_contains?: string;
    status?: string;
    ids?: string[];
    deployment_type?: string;
  },
): Promise<DeploymentsTable[]> {
  let query = db.selectFrom("deployments").selectAll().where("workspace_id", "=", workspaceId);
  if (q.status) query = query.where("status", "=", q.status);
  if (q.ids) query = q.ids.length ? query.where("id", "in", q.ids) : query.where("id", "=", "");
  // Name matching is case-insensitive and done here: LIKE escaping differs between the dialects, and
  // a workspace has few deployments.
  const rows = await query.orderBy("created_at", "desc").orderBy("id", "desc").execute();
  const filtered = rows.filter(
    (r) =>
      (!q.name_contains || r.name.toLowerCase().includes(q.name_contains.toLowerCase())) &&
      (!q.deployment_type ||
        (JSON.parse(r.source_config) as { deployment_type?: string }).deployment_type === q.deployment_type),
  );
  return filtered.slice(q.offset, q.offset + q.limit);
}

export async function listRevisionRows(
  db: Kysely<Database>,
  deploymentId: string,
  q: { limit: number; offset: number; statuses?: string[] },
): Promise<DeploymentRevisionsTable[]> {
  let query = db.selectFrom("deployment_revisions").selectAll().where("deployment_id", "=", deploymentId);
  if (q.statuses?.length) query = query.where("status", "in", q.statuses);
  return query.orderBy("id", "desc").limit(q.limit).offset(q.offset).execute();
}
