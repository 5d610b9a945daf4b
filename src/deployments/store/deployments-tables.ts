/** Tables of the deployments feature, merged into the shared `Database` interface. */
export interface DeploymentsTable {
  id: string;
  workspace_id: string;
  name: string;
  source: string;
  /** JSON: the deployment's `source_config` as stored (without the computed `custom_url`). */
  source_config: string;
  /** JSON: the `source_revision_config` the next revision starts from. */
  source_revision_config: string;
  /** JSON array of secret names (names are not secret; values are sealed below). */
  secret_names: string;
  secrets_key_id: string;
  /** Sealed JSON array of `{name, value}`. */
  secrets_ciphertext: string;
  /** The deployment's own API key (used by the platform for health runs), revoked on delete. */
  api_key_id: string;
  api_key_key_id: string;
  api_key_ciphertext: string;
  status: string;
  latest_revision_id: string | null;
  active_revision_id: string | null;
  /** Per-deployment rollout lock: one revision at a time, held by one platform process (lease). */
  rollout_revision_id: string | null;
  rollout_owner: string | null;
  rollout_lease_until: string | null;
  /** Host uid the deployment's confined processes run as (unique; allocated on first rollout). */
  run_uid: number | null;
  /** The deployment's own agent-server key (sealed): what its agent server seals with. */
  agent_key_key_id: string | null;
  agent_key_ciphertext: string | null;
  /**
   * JSON: the egress rules of the deployment's processes, in the egress proxy's stored form
   * (`opaque` values are ids of sealed rows, never values); null = the default posture.
   */
  proxy_config: string | null;
  created_at: string;
  updated_at: string;
}

export interface DeploymentRevisionsTable {
  id: string;
  deployment_id: string;
  workspace_id: string;
  status: string;
  source: string;
  /** JSON: `{repo_ref, langgraph_config_path, image_uri, source_tarball_path, local_path}`. */
  source_revision_config: string;
  /** JSON: what else the build needs (`repo_url`, `install_command`, `build_command`). */
  build_config: string;
  /** Set on redeploys and secret-only changes: deploy that revision's build instead of building. */
  reuse_build_of: string | null;
  artifact_dir: string | null;
  project_dir: string | null;
  /** JSON array of graph ids found by the build. */
  graphs: string | null;
  repo_commit_sha: string | null;
  /** The platform process (node id) working on or serving this revision. */
  owner: string | null;
  lease_until: string | null;
  phase_deadline: string | null;
  attempt: number;
  cancel_requested: number;
  pid: number | null;
  serving_url: string | null;
  status_message: string | null;
  created_at: string;
  updated_at: string;
}

export interface DeploymentRevisionTransitionsTable {
  id: string;
  revision_id: string;
  from_status: string | null;
  to_status: string;
  reason: string | null;
  at: string;
}

export interface DeploymentRevisionLogsTable {
  id: string;
  revision_id: string;
  kind: string;
  level: string;
  message: string;
  timestamp: string;
}

declare module "../../store/schema.ts" {
  interface Database {
    deployments: DeploymentsTable;
    deployment_revisions: DeploymentRevisionsTable;
    deployment_revision_transitions: DeploymentRevisionTransitionsTable;
    deployment_revision_logs: DeploymentRevisionLogsTable;
  }
}
