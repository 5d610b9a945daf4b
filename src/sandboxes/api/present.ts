import { presentProxyConfig, type StoredProxyConfig } from "../../egress/index.ts";
import type { SandboxRow, SnapshotRow } from "../store/sandbox-store.ts";

/** The sandbox record as LangSmith Deployment's SandboxResponse. */
export function presentSandbox(row: SandboxRow, baseUrl: string): Record<string, unknown> {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    status_message: row.status_message,
    dataplane_url: `${baseUrl}/sandboxes/dp/${row.id}`,
    snapshot_id: row.snapshot_id,
    vcpus: row.vcpus,
    cpu_millicores: row.cpu_millicores,
    mem_bytes: Number(row.mem_bytes),
    fs_capacity_bytes: Number(row.fs_capacity_bytes),
    size_class: null,
    idle_ttl_seconds: row.idle_ttl_seconds,
    delete_after_stop_seconds: row.delete_after_stop_seconds,
    preserve_memory_on_stop: false,
    stopped_at: row.stopped_at,
    labels: JSON.parse(row.labels) as Record<string, string>,
    mount_config: null,
    proxy_config: presentProxyConfig(row.proxy_config ? (JSON.parse(row.proxy_config) as StoredProxyConfig) : null),
    created_at: row.created_at,
    created_by: row.created_by,
    updated_at: row.updated_at,
    updated_by: row.updated_by,
  };
}

export function presentSnapshot(row: SnapshotRow): Record<string, unknown> {
  return {
    id: row.id,
    name: row.name,
    status: row.status,
    status_message: row.status_message,
    docker_image: row.docker_image ?? null,
    image_digest: row.image_digest ?? null,
    fs_capacity_bytes: Number(row.fs_capacity_bytes),
    fs_used_bytes: row.fs_used_bytes === null ? null : Number(row.fs_used_bytes),
    memory_snapshot_size_bytes: null,
    size_bytes: row.size_bytes === null ? null : Number(row.size_bytes),
    labels: JSON.parse(row.labels) as Record<string, string>,
    tags: [row.tag],
    registry_id: row.registry_id ?? null,
    source_sandbox_id: row.source_sandbox_id,
    created_by: row.created_by,
    created_at: row.created_at,
    updated_at: row.updated_at,
  };
}
