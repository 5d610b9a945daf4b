/** Tables of the sandboxes feature (merged into the shared `Database` interface). */
export interface SandboxesTable {
  id: string;
  workspace_id: string;
  name: string;
  /** provisioning | ready | stopped | failed | deleting */
  status: string;
  status_message: string | null;
  status_changed_at: string;
  snapshot_id: string | null;
  vcpus: number;
  cpu_millicores: number;
  mem_bytes: number | string;
  fs_capacity_bytes: number | string;
  idle_ttl_seconds: number;
  delete_after_stop_seconds: number;
  labels: string;
  /** env_vars as sealed JSON (values may be tokens). */
  env_key_id: string | null;
  env_ciphertext: string | null;
  /** Stored form from the egress feature's prepareProxyConfig (opaque values sealed there). */
  proxy_config: string | null;
  /** Driver facts about the running sandbox (JSON), for re-adoption after a restart. */
  runtime: string | null;
  stopped_at: string | null;
  created_at: string;
  created_by: string;
  updated_at: string;
  updated_by: string;
}

export interface SandboxSnapshotsTable {
  id: string;
  workspace_id: string;
  name: string;
  tag: string;
  /** building | ready | failed */
  status: string;
  status_message: string | null;
  source_sandbox_id: string | null;
  fs_capacity_bytes: number | string;
  fs_used_bytes: number | string | null;
  size_bytes: number | string | null;
  labels: string;
  created_by: string;
  created_at: string;
  updated_at: string;
}

declare module "../store/schema.ts" {
  interface Database {
    sandboxes: SandboxesTable;
    sandbox_snapshots: SandboxSnapshotsTable;
  }
}
