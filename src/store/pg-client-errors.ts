import type pg from "pg";

/**
 * Keeps a pool's connection failures from ending the process. pg-pool listens for `error` only on
 * idle clients; a checked-out client whose connection drops (the server restarted, a session
 * timeout, a network cut between two statements of a transaction or while an advisory lock is held)
 * emits an `error` nobody hears, which Node turns into an uncaught exception. With a listener on
 * every client, that client's next query fails with its own error instead, and the pool replaces it.
 */
export function surviveClientErrors(pool: pg.Pool, onError: (err: Error) => void = () => undefined): void {
  pool.on("error", onError);
  pool.on("connect", (client) => client.on("error", onError));
}
