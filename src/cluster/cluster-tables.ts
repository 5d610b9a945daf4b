/** The replica registry (merged into the shared `Database` interface). */
export interface ReplicasTable {
  /** Stable per `$WHARF_HOME` (`replica-id.ts`), so a restarted replica recognises its own workloads. */
  id: string;
  /** Where other replicas reach this one's internal listener. */
  url: string;
  started_at: string;
  /** Milliseconds since the epoch on the database's clock: the lease, renewed by heartbeats. */
  lease_until_ms: number | string;
}

declare module "../store/schema.ts" {
  interface Database {
    replicas: ReplicasTable;
  }
}
