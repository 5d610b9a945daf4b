/**
 * The stored (database) form of a proxy_config. Opaque values are references to sealed rows in
 * `egress_sealed_values`; workspace-secret values keep their `{KEY}` template and are resolved
 * when the configuration is applied to a running sandbox.
 */
export type StoredHeader =
  | { name: string; type: "plaintext" | "workspace_secret"; value: string }
  | { name: string; type: "opaque"; ref: string };

export type StoredSecret = { type: "workspace_secret"; value: string } | { type: "opaque"; ref: string };

export interface StoredHeaderRule {
  name: string;
  type: "header";
  enabled: boolean;
  match_hosts: string[];
  match_paths: string[];
  headers: StoredHeader[];
  env_vars?: Record<string, string>;
}

export interface StoredCloudARule {
  name: string;
  type: "cloud_a";
  enabled: boolean;
  cloud_a: { access_key_id: StoredSecret; secret_access_key: StoredSecret };
  env_vars?: Record<string, string>;
}

export interface StoredCloudBRule {
  name: string;
  type: "cloud_b";
  enabled: boolean;
  cloud_b: { service_account_json: StoredSecret; scopes: string[] };
  env_vars?: Record<string, string>;
}

export type StoredRule = StoredHeaderRule | StoredCloudARule | StoredCloudBRule;

export interface StoredCallback {
  match_hosts: string[];
  url: string;
  ttl_seconds: number;
  request_headers: StoredHeader[];
}

export interface StoredConfigV1 {
  version: 1;
  rules: StoredRule[];
  callbacks: StoredCallback[];
  access_control: { allow_list: string[] } | { deny_list: string[] } | null;
  no_proxy: string[];
  /**
   * Platform-only (never from a `proxy_config`): destinations (`host`, on 80/443, or `host:port`)
   * this target may dial at internal addresses: a deployment build step's host-configured package
   * registries, when the operator allows them (`WHARF_BUILD_REGISTRIES_INTERNAL`).
   */
  internal_hosts?: string[];
  /** Platform-only: PEM files trusted for this target's upstream TLS besides the proxy's roots (the host package managers' CA files). */
  upstream_ca_files?: string[];
}

/** Every sealed-value id a stored config refers to (to open them, or to delete the stale ones). */
export function sealedRefs(cfg: StoredConfigV1 | null): string[] {
  if (!cfg) return [];
  const out: string[] = [];
  const header = (h: StoredHeader) => h.type === "opaque" && out.push(h.ref);
  const secret = (s: StoredSecret) => s.type === "opaque" && out.push(s.ref);
  for (const r of cfg.rules) {
    if (r.type === "header") r.headers.forEach(header);
    else if (r.type === "cloud_a") [r.cloud_a.access_key_id, r.cloud_a.secret_access_key].forEach(secret);
    else secret(r.cloud_b.service_account_json);
  }
  for (const c of cfg.callbacks) c.request_headers.forEach(header);
  return out;
}

export function asStoredConfig(value: unknown): StoredConfigV1 | null {
  if (!value || typeof value !== "object") return null;
  const v = value as StoredConfigV1;
  return v.version === 1 && Array.isArray(v.rules) ? v : null;
}
