// Cluster plumbing shared by replicas: run events through Redis Streams, the replica registry, and
// forwarding of workload requests to the replica that runs the workload, and every platform
// process's presence lock on PostgreSQL (replica mode or not: the rollout engine reads it too).
export {
  RunEventBus,
  StreamGapError,
  type PumpFence,
  type ThreadEventItem,
  type ThreadEventStore,
} from "./run-event-bus.ts";
export type { RunStreamWriter } from "./run-stream-writer.ts";
export { IdleWaiters } from "./idle-waiters.ts";
export { RedisRetry } from "./redis-retry.ts";
export { compareIds } from "./stream-reader.ts";
export {
  eventNumber,
  nextStep,
  parseRunEntry,
  parseThreadEventEntry,
  threadEventsKey,
  type ThreadEventEntry,
  runAttemptKey,
  runStreamKey,
  streamId,
  threadRunsKey,
} from "./stream-ids.ts";
export { Cluster, createCluster, isAnotherReplicas, type ClusterView, type WorkloadOwner } from "./cluster.ts";
export { REPLICA_AUTH_HEADER } from "./replica-auth.ts";
export type { ControlCall } from "./forwarder.ts";
export { PresenceLock, presenceOf, type PresenceReading } from "./presence.ts";
