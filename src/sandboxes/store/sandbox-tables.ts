/** Tables of the sandboxes feature (merged into the shared `Database` interface). */
export interface SandboxesTable {
  id: string;
  workspace_id: string;
  name: string;
  /** provisioning | ready | stopped | failed | error (its replica died) | deleting */
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
  /** Replica mode: the replica that runs it (data-plane requests are forwarded there); null in one process. */
  owner_replica?: string | null;
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
  /** Snapshots made from an OCI image: the reference, the manifest digest pulled, the registry used. */
  docker_image: string | null;
  image_digest: string | null;
  registry_id: string | null;
  /** A captured snapshot of a sandbox started from an image: the image snapshot its layer sits on. */
  base_snapshot_id: string | null;
}

/** Credentials for pulling private images; the password is write-only and sealed. */
export interface SandboxRegistriesTable {
  id: string;
  workspace_id: string;
  name: string;
  url: string;
  username: string;
  password_key_id: string;
  password_cipher: string;
  created_at: string;
  created_by: string;
  updated_at: string;
  updated_by: string;
}

declare module "../../store/schema.ts" {
  interface Database {
    sandboxes: SandboxesTable;
    sandbox_snapshots: SandboxSnapshotsTable;
    sandbox_registries: SandboxRegistriesTable;
  }
}
