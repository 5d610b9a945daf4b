/**
 * Tables of the egress proxy, merged into the shared `Database` type.
 * - `egress_sealed_values`: write-only (`opaque`) proxy_config values, sealed with the master key;
 *   the stored proxy_config refers to them by id (a table of their own so a master-key rotation
 *   re-encrypts them like every other sealed column).
 * - `egress_cas`: one interception CA per workspace; the private key is sealed and never leaves
 *   the platform process.
 * - `egress_audit_log`: injections, signings, callbacks and blocks per sandbox, never a value.
 */
export interface EgressSealedValuesTable {
  id: string;
  workspace_id: string;
  key_id: string;
  ciphertext: string;
  created_at: string;
}

export interface EgressCasTable {
  workspace_id: string;
  cert_pem: string;
  key_id: string;
  key_ciphertext: string;
  not_after: string;
  created_at: string;
}

export interface EgressAuditLogTable {
  id: string;
  workspace_id: string;
  sandbox_id: string;
  at: string;
  last_at: string;
  count: number;
  kind: string;
  decision: string;
  rule: string | null;
  host: string;
  port: number;
  method: string | null;
  path: string | null;
  status: number | null;
  reason: string | null;
}

declare module "../store/schema.ts" {
  interface Database {
    egress_sealed_values: EgressSealedValuesTable;
    egress_cas: EgressCasTable;
    egress_audit_log: EgressAuditLogTable;
  }
}
