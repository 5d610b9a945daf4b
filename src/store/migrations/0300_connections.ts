import type { Kysely } from "kysely";

// Kysely<any>: migrations describe the schema as it was, not as the current types say.
// eslint-disable-next-line max-lines-per-function -- a migration creates its part's tables in one place, in order
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable("oauth_providers")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id").onDelete("cascade"))
    .addColumn("provider_id", "text", (c) => c.notNull())
    .addColumn("name", "text", (c) => c.notNull())
    .addColumn("client_id", "text", (c) => c.notNull())
    .addColumn("client_secret_key_id", "text")
    .addColumn("client_secret_cipher", "text")
    .addColumn("auth_url", "text", (c) => c.notNull())
    .addColumn("token_url", "text", (c) => c.notNull())
    .addColumn("revocation_url", "text")
    .addColumn("userinfo_url", "text")
    .addColumn("issuer", "text")
    .addColumn("uses_pkce", "integer", (c) => c.notNull())
    .addColumn("code_challenge_method", "text", (c) => c.notNull())
    .addColumn("token_endpoint_auth_method", "text", (c) => c.notNull())
    .addColumn("scope_separator", "text", (c) => c.notNull())
    .addColumn("extra_authorize_params", "text", (c) => c.notNull())
    .addColumn("account_label_source", "text", (c) => c.notNull())
    .addColumn("account_label_claim", "text")
    .addColumn("provider_type", "text")
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("updated_at", "text", (c) => c.notNull())
    .addUniqueConstraint("oauth_providers_workspace_provider", ["workspace_id", "provider_id"])
    .execute();

  await db.schema
    .createTable("oauth_tokens")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id").onDelete("cascade"))
    .addColumn("provider_id", "text", (c) => c.notNull())
    .addColumn("user_id", "text", (c) => c.notNull())
    .addColumn("provider_account_label", "text")
    .addColumn("account_subject", "text")
    .addColumn("scopes", "text", (c) => c.notNull())
    .addColumn("token_type", "text", (c) => c.notNull())
    .addColumn("access_key_id", "text", (c) => c.notNull())
    .addColumn("access_cipher", "text", (c) => c.notNull())
    .addColumn("refresh_key_id", "text")
    .addColumn("refresh_cipher", "text")
    .addColumn("expires_at", "text")
    .addColumn("is_default", "integer", (c) => c.notNull())
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("generation", "integer", (c) => c.notNull())
    .addColumn("refresh_lease_until", "text")
    .addColumn("refresh_lease_owner", "text")
    .addColumn("last_refreshed_at", "text")
    .addColumn("last_error", "text")
    .addColumn("created_by", "text", (c) => c.notNull())
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("updated_at", "text", (c) => c.notNull())
    .addForeignKeyConstraint(
      "oauth_tokens_provider",
      ["workspace_id", "provider_id"],
      "oauth_providers",
      ["workspace_id", "provider_id"],
      (fk) => fk.onDelete("cascade"),
    )
    .execute();
  await db.schema
    .createIndex("oauth_tokens_owner")
    .on("oauth_tokens")
    .columns(["workspace_id", "user_id", "provider_id"])
    .execute();
  await db.schema.createIndex("oauth_tokens_expiry").on("oauth_tokens").columns(["status", "expires_at"]).execute();

  await db.schema
    .createTable("oauth_auth_requests")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id").onDelete("cascade"))
    .addColumn("provider_id", "text", (c) => c.notNull())
    .addColumn("user_id", "text", (c) => c.notNull())
    .addColumn("created_by", "text", (c) => c.notNull())
    .addColumn("agent_id", "text")
    .addColumn("scopes", "text", (c) => c.notNull())
    .addColumn("state_hash", "text", (c) => c.notNull().unique())
    .addColumn("pkce_key_id", "text")
    .addColumn("pkce_cipher", "text")
    .addColumn("nonce", "text")
    .addColumn("redirect_uri", "text", (c) => c.notNull())
    .addColumn("is_default", "integer", (c) => c.notNull())
    .addColumn("replace_token_id", "text")
    .addColumn("status", "text", (c) => c.notNull())
    .addColumn("result_token_id", "text")
    .addColumn("error", "text")
    .addColumn("expires_at", "text", (c) => c.notNull())
    .addColumn("created_at", "text", (c) => c.notNull())
    .addColumn("completed_at", "text")
    .addForeignKeyConstraint(
      "oauth_auth_requests_provider",
      ["workspace_id", "provider_id"],
      "oauth_providers",
      ["workspace_id", "provider_id"],
      (fk) => fk.onDelete("cascade"),
    )
    .execute();
  await db.schema.createIndex("oauth_auth_requests_expiry").on("oauth_auth_requests").column("expires_at").execute();

  await db.schema
    .createTable("agent_connections")
    .addColumn("id", "text", (c) => c.primaryKey())
    .addColumn("workspace_id", "text", (c) => c.notNull().references("workspaces.id").onDelete("cascade"))
    .addColumn("agent_id", "text", (c) => c.notNull())
    .addColumn("oauth_token_id", "text", (c) => c.notNull().references("oauth_tokens.id").onDelete("cascade"))
    .addColumn("created_by", "text", (c) => c.notNull())
    .addColumn("created_at", "text", (c) => c.notNull())
    .addUniqueConstraint("agent_connections_agent_token", ["workspace_id", "agent_id", "oauth_token_id"])
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const t of ["agent_connections", "oauth_auth_requests", "oauth_tokens", "oauth_providers"])
    await db.schema.dropTable(t).execute();
}
