/**
 * Agent-server tables, merged into the platform's `Database`. Every row carries `server_id` (the
 * project or deployment it belongs to) so that several agent servers can share one database.
 * JSON columns hold text; timestamps are ISO-8601 UTC text.
 */
export interface AgentAssistantsTable {
  server_id: string;
  assistant_id: string;
  graph_id: string;
  name: string;
  description: string | null;
  config: string;
  context: string;
  metadata: string;
  version: number;
  created_at: string;
  updated_at: string;
}

export interface AgentAssistantVersionsTable {
  server_id: string;
  assistant_id: string;
  version: number;
  graph_id: string;
  name: string;
  description: string | null;
  config: string;
  context: string;
  metadata: string;
  created_at: string;
}

export interface AgentThreadsTable {
  /** Globally unique (not per server) so that checkpoints of two servers never mix. */
  thread_id: string;
  server_id: string;
  status: string;
  metadata: string;
  config: string;
  /** Last known state values (JSON) and interrupts, for thread reads and `values` searches. */
  state_values: string | null;
  interrupts: string | null;
  created_at: string;
  updated_at: string;
}

export interface AgentRunsTable {
  run_id: string;
  server_id: string;
  thread_id: string;
  assistant_id: string;
  status: string;
  metadata: string;
  kwargs: string;
  multitask_strategy: string;
  /** 1 for a stateless run whose thread is removed when it ends. */
  temporary: number;
  /** The process executing the run, and until when its claim holds without a heartbeat. */
  worker_id: string | null;
  lease_until: string | null;
  created_at: string;
  updated_at: string;
}

/** The LangGraph store (`/store/*`, `config.store` in graphs): one row per item, per server. */
export interface AgentStoreItemsTable {
  server_id: string;
  /** The namespace labels joined with "." (labels cannot contain one). */
  namespace: string;
  key: string;
  value: string;
  created_at: string;
  updated_at: string;
}

declare module "../store/schema.ts" {
  interface Database {
    agent_assistants: AgentAssistantsTable;
    agent_assistant_versions: AgentAssistantVersionsTable;
    agent_threads: AgentThreadsTable;
    agent_runs: AgentRunsTable;
    agent_store_items: AgentStoreItemsTable;
  }
}
