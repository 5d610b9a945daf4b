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
  /** `store.ttl`: expiry (ISO), null = never; the item's TTL in minutes, to refresh on read. */
  expires_at: string | null;
  ttl_minutes: number | null;
}

/** `store.index`: one embedding (JSON number array) per indexed field of an item. */
export interface AgentStoreVectorsTable {
  server_id: string;
  namespace: string;
  key: string;
  field: string;
  embedding: string;
}

/** A scheduled run (`/runs/crons`): on a thread, or stateless (a new thread per firing). */
export interface AgentCronsTable {
  cron_id: string;
  server_id: string;
  assistant_id: string;
  /** Null for a stateless cron; a thread cron is removed with its thread (foreign key). */
  thread_id: string | null;
  user_id: string | null;
  schedule: string;
  /** The run body each firing sends to the run engine (JSON). */
  payload: string;
  metadata: string;
  on_run_completed: string;
  enabled: number;
  end_time: string | null;
  /** When the cron fires next; moved forward by the conditional update that claims a firing. */
  next_run_date: string | null;
  /** The creator's auth context (user, permissions), sealed: firings run as that user. */
  auth_key_id: string;
  auth_sealed: string;
  created_at: string;
  updated_at: string;
}

declare module "../../store/schema.ts" {
  interface Database {
    agent_assistants: AgentAssistantsTable;
    agent_assistant_versions: AgentAssistantVersionsTable;
    agent_threads: AgentThreadsTable;
    agent_runs: AgentRunsTable;
    agent_store_items: AgentStoreItemsTable;
    agent_store_vectors: AgentStoreVectorsTable;
    agent_crons: AgentCronsTable;
  }
}
