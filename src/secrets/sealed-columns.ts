/**
 * Every place the platform stores a value sealed with the master key, in one static list.
 *
 * The server and every CLI command (`wharf secrets rotate-key` above all) read this same list; nothing
 * registers itself by being imported, so a command that loads no feature still sees every column.
 * `test/secrets/sealed-columns.test.ts` fails when a migration adds a column named like a sealed
 * value (`*_cipher`, `*_ciphertext`, `*_sealed`) that is not listed here, or when a feature's
 * associated data no longer matches the shape written here.
 *
 * To add an entry: append one object below with the table, the columns that identify a row, where
 * the key id and the ciphertext are stored, and the associated data the feature passes to
 * `box.seal(value, aad)`, written as `purpose` plus the row's columns (joined with `:`).
 */

/** Associated data `purpose:<col1>:<col2>…` built from the row's own columns. */
export interface AadShape {
  purpose: string;
  columns: readonly string[];
}

interface SealedBase {
  /** Stable name used in messages (`feature.what`). */
  name: string;
  table: string;
  /** Columns that identify one row (its primary key). */
  keyColumns: readonly string[];
  aad: AadShape;
}

/** A key-id column beside a ciphertext column (base64 iv|tag|ciphertext). */
export interface SealedColumn extends SealedBase {
  kind: "column";
  keyIdColumn: string;
  cipherColumn: string;
}

/** A `{keyId, blob}` object stored under `field` of a JSON text column. */
export interface SealedJsonField extends SealedBase {
  kind: "json";
  jsonColumn: string;
  field: string;
}

export type SealedLocation = SealedColumn | SealedJsonField;

const row = (
  table: string,
  name: string,
  keyIdColumn: string,
  cipherColumn: string,
  purpose: string,
): SealedColumn => ({
  kind: "column",
  name,
  table,
  keyColumns: ["workspace_id", "id"],
  keyIdColumn,
  cipherColumn,
  aad: { purpose, columns: ["workspace_id", "id"] },
});

export const SEALED_LOCATIONS: readonly SealedLocation[] = [
  // Workspace secrets (`PUT /v2/secrets`).
  {
    kind: "column",
    name: "secrets.value",
    table: "secrets",
    keyColumns: ["workspace_id", "key"],
    keyIdColumn: "key_id",
    cipherColumn: "ciphertext",
    aad: { purpose: "workspace-secret", columns: ["workspace_id", "key"] },
  },
  // Egress: opaque header values and other write-only proxy_config values; the workspace's interception CA key.
  row("egress_sealed_values", "egress.opaque-value", "key_id", "ciphertext", "egress-value"),
  {
    kind: "column",
    name: "egress.ca-key",
    table: "egress_cas",
    keyColumns: ["workspace_id"],
    keyIdColumn: "key_id",
    cipherColumn: "key_ciphertext",
    aad: { purpose: "egress-ca", columns: ["workspace_id"] },
  },
  // Connections: provider client secrets, OAuth tokens, pending flows (PKCE verifier, authorize URL).
  row(
    "oauth_providers",
    "connections.client-secret",
    "client_secret_key_id",
    "client_secret_cipher",
    "oauth-client-secret",
  ),
  row("oauth_tokens", "connections.access-token", "access_key_id", "access_cipher", "oauth-access-token"),
  row("oauth_tokens", "connections.refresh-token", "refresh_key_id", "refresh_cipher", "oauth-refresh-token"),
  row("oauth_auth_requests", "connections.pkce-verifier", "pkce_key_id", "pkce_cipher", "oauth-pkce-verifier"),
  row("oauth_auth_requests", "connections.authorize-url", "url_key_id", "url_cipher", "oauth-authorize-url"),
  // Deployments: secrets (environment of the agent server) and the deployment's own API key.
  row("deployments", "deployments.secrets", "secrets_key_id", "secrets_ciphertext", "deployment-secrets"),
  row("deployments", "deployments.api-key", "api_key_key_id", "api_key_ciphertext", "deployment-api-key"),
  row("deployments", "deployments.agent-key", "agent_key_key_id", "agent_key_ciphertext", "deployment-agent-key"),
  // Deployments on PostgreSQL: the password of the deployment's own database role.
  row(
    "deployments",
    "deployments.db-password",
    "db_password_key_id",
    "db_password_ciphertext",
    "deployment-db-password",
  ),
  // Sandboxes: the environment given at creation.
  row("sandboxes", "sandboxes.env", "env_key_id", "env_ciphertext", "sandbox-env"),
  // Sandboxes: image registry passwords (write-only).
  row("sandbox_registries", "sandboxes.registry-password", "password_key_id", "password_cipher", "sandbox-registry"),
  // Agent server: the creator of a cron (replayed on every tick) and a queued run's caller data.
  {
    kind: "column",
    name: "agent-server.cron-auth",
    table: "agent_crons",
    keyColumns: ["server_id", "cron_id"],
    keyIdColumn: "auth_key_id",
    cipherColumn: "auth_sealed",
    aad: { purpose: "agent-cron-auth", columns: ["server_id", "cron_id"] },
  },
  {
    kind: "json",
    name: "agent-server.run-private",
    table: "agent_runs",
    keyColumns: ["run_id"],
    jsonColumn: "kwargs",
    field: "sealed_private",
    aad: { purpose: "agent-run-private", columns: ["server_id", "run_id"] },
  },
];

/** The associated data of one row of a location. */
export function aadOf(location: SealedLocation, values: Record<string, unknown>): string {
  return [location.aad.purpose, ...location.aad.columns.map((c) => String(values[c]))].join(":");
}

/** Columns a scan of the location must read. */
export function columnsOf(location: SealedLocation): string[] {
  const own = location.kind === "column" ? [location.keyIdColumn, location.cipherColumn] : [location.jsonColumn];
  return [...new Set([...location.keyColumns, ...location.aad.columns, ...own])];
}
