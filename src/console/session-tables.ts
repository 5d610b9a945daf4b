export interface ConsoleSessionsTable {
  id_hash: string;
  user_id: string;
  workspace_id: string;
  /** The key the session was opened with: revoking it ends the session too. */
  api_key_id: string | null;
  signed_in_with: "api_key" | "bearer";
  created_at: string;
  expires_at: string;
}

declare module "../store/schema.ts" {
  interface Database {
    console_sessions: ConsoleSessionsTable;
  }
}
