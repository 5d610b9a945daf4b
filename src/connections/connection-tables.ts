/**
 * Tables of the connections feature, merged into the shared `Database` interface. Sealed values are
 * a pair of columns: the master key id and the AES-256-GCM blob (see `sealed-columns.ts`).
 */
export interface OAuthProvidersTable {
  id: string;
  workspace_id: string;
  provider_id: string;
  name: string;
  client_id: string;
  client_secret_key_id: string | null;
  client_secret_cipher: string | null;
  auth_url: string;
  token_url: string;
  revocation_url: string | null;
  userinfo_url: string | null;
  issuer: string | null;
  uses_pkce: number;
  code_challenge_method: string;
  token_endpoint_auth_method: string;
  scope_separator: string;
  /** JSON object of extra authorize parameters (for example `access_type=offline`). */
  extra_authorize_params: string;
  account_label_source: string;
  account_label_claim: string | null;
  provider_type: string | null;
  created_at: string;
  updated_at: string;
}

/** One started connect flow; `state_hash` is SHA-256 of the `state` sent to the provider. */
export interface OAuthAuthRequestsTable {
  id: string;
  workspace_id: string;
  provider_id: string;
  /** The owner the token will belong to (the request's `user_id`, else the caller's user). */
  user_id: string;
  created_by: string;
  agent_id: string | null;
  scopes: string;
  state_hash: string;
  pkce_key_id: string | null;
  pkce_cipher: string | null;
  nonce: string | null;
  /** The authorization URL (it holds the state), sealed; reused while the flow is pending. */
  url_key_id: string | null;
  url_cipher: string | null;
  redirect_uri: string;
  is_default: number;
  /** The token to replace (re-authentication of a known account). */
  replace_token_id: string | null;
  /** pending → exchanging → completed | failed */
  status: string;
  result_token_id: string | null;
  error: string | null;
  expires_at: string;
  created_at: string;
  completed_at: string | null;
}

export interface OAuthTokensTable {
  id: string;
  workspace_id: string;
  provider_id: string;
  user_id: string;
  provider_account_label: string | null;
  account_subject: string | null;
  scopes: string;
  token_type: string;
  access_key_id: string;
  access_cipher: string;
  refresh_key_id: string | null;
  refresh_cipher: string | null;
  expires_at: string | null;
  is_default: number;
  /** active | token_expired (the provider refused the refresh token: re-authentication needed) */
  status: string;
  /** Bumped on every token write; a refresher holds the lease only for the generation it read. */
  generation: number;
  refresh_lease_until: string | null;
  refresh_lease_owner: string | null;
  last_refreshed_at: string | null;
  last_error: string | null;
  created_by: string;
  created_at: string;
  updated_at: string;
}

export interface AgentConnectionsTable {
  id: string;
  workspace_id: string;
  agent_id: string;
  oauth_token_id: string;
  created_by: string;
  created_at: string;
}

declare module "../store/schema.ts" {
  interface Database {
    oauth_providers: OAuthProvidersTable;
    oauth_auth_requests: OAuthAuthRequestsTable;
    oauth_tokens: OAuthTokensTable;
    agent_connections: AgentConnectionsTable;
  }
}
