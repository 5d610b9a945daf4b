import { AsyncLocalStorage } from "node:async_hooks";
import type pg from "pg";

/**
 * Checkpoint writes fenced by the run's row, in the same PostgreSQL transaction.
 *
 * A replica checks that it still holds a run's lease before each checkpoint write, but a check in
 * the process is not enough: a replica frozen (SIGSTOP, a paused VM) just after the check holds
 * its open transaction, and its row locks, while another replica takes the run over. The new
 * attempt's writes of the same keys (blob versions and task writes are deterministic) then wait
 * on the frozen one, and once it is thawed the two transactions deadlock or its late write
 * commits over the new attempt's. So each checkpoint transaction of a run first takes a share
 * lock on the run's row, still owned by this worker: a takeover (an UPDATE of that row) waits for
 * the transaction to end, and a transaction begun after it finds the row taken and writes nothing.
 * The sessions' `idle_in_transaction_session_timeout` bounds how long a frozen process can make
 * the takeover wait: its session is ended and its transaction rolled back.
 */

/** Whose checkpoint writes these are: the run and the worker that must still own its row. */
export interface CheckpointOwner {
  runId: string;
  workerId: string;
}

/** Set around a run's checkpoint writes (`put`, `putWrites`) by the run engine. */
export const checkpointOwner = new AsyncLocalStorage<CheckpointOwner>();

/** The run's row is no longer this worker's: another attempt owns the run. */
export class LeaseLostError extends Error {
  constructor(runId: string) {
    super(`run ${runId} is owned by another attempt: checkpoint not written`);
    this.name = "LeaseLostError";
  }
}

/** The statement that takes the run's row, if still this worker's, for the rest of the transaction. */
export function fenceStatement(schema?: string): string {
  const table = schema ? `"${schema.replace(/"/g, "")}".agent_runs` : "agent_runs";
  return `SELECT 1 FROM ${table} WHERE run_id = $1 AND worker_id = $2 AND status = 'running' FOR SHARE`;
}

/**
 * How long a checkpoint session may sit idle inside a transaction: under the shortest time from a
 * freeze to a takeover (two thirds of a lease: leases are renewed every third), so a frozen
 * replica's transaction is gone by then; never under a second, so a busy but live process does
 * not lose its writes.
 */
export function idleInTransactionMs(leaseMs: number): number {
  return Math.max(1000, Math.floor(leaseMs / 2));
}

/**
 * The pool as the PostgreSQL checkpointer uses it: a connection taken inside `checkpointOwner.run`
 * follows its `BEGIN` with the fence statement, and fails the transaction when the run is not
 * this worker's any more (the saver then rolls back). Everything else goes to the real pool.
 */
export function fencingPool(pool: pg.Pool, schema?: string): pg.Pool {
  const fence = fenceStatement(schema);
  return new Proxy(pool, {
    get(target, prop, receiver) {
      if (prop === "connect") {
        return async () => {
          const owner = checkpointOwner.getStore();
          const client = await target.connect();
          return owner ? fencedClient(client, owner, fence) : client;
        };
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}

function fencedClient(client: pg.PoolClient, owner: CheckpointOwner, fence: string): pg.PoolClient {
  return new Proxy(client, {
    get(target, prop, receiver) {
      if (prop === "query") {
        return async (text: unknown, values?: unknown[]) => {
          if (text !== "BEGIN") return target.query(text as string, values);
          const begun = await target.query("BEGIN");
          const owned = await target.query(fence, [owner.runId, owner.workerId]);
          if (!owned.rowCount) throw new LeaseLostError(owner.runId);
          return begun;
        };
      }
      const value = Reflect.get(target, prop, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  });
}
