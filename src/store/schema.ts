/**
 * Table types shared by both dialects. Portable column types only: text ids (UUIDv7), ISO-8601
 * UTC text timestamps, integer booleans, JSON as text. Each feature adds its own table interfaces
 * to `Database` through declaration merging in its own `*-tables.ts` file.
 */
export interface WorkspacesTable {
  id: string;
  name: string;
  created_at: string;
  updated_at: string;
}

export interface UsersTable {
  id: string;
  email: string;
  display_name: string;
  created_at: string;
}

export interface WorkspaceMembersTable {
  workspace_id: string;
  user_id: string;
  role: string;
  created_at: string;
}

export interface ApiKeysTable {
  id: string;
  workspace_id: string;
  user_id: string;
  name: string;
  prefix: string;
  key_hash: string;
  created_at: string;
  last_used_at: string | null;
  expires_at: string | null;
  revoked_at: string | null;
}

export interface SecretsTable {
  workspace_id: string;
  key: string;
  key_id: string;
  ciphertext: string;
  created_at: string;
  updated_at: string;
}

// Interfaces (not a type alias) so that feature modules can merge in their own tables.
export interface Database {
  workspaces: WorkspacesTable;
  users: UsersTable;
  workspace_members: WorkspaceMembersTable;
  api_keys: ApiKeysTable;
  secrets: SecretsTable;
}
