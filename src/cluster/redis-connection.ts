import type { Logger } from "../log/logger.ts";

/** A Redis connection that sends raw commands (RESP2 replies as node-redis gives them). */
export interface RedisConnection {
  command<T = unknown>(args: Array<string | number>): Promise<T>;
  /** The server-side id of this connection (for `CLIENT UNBLOCK`). */
  clientId(): Promise<number>;
  close(): Promise<void>;
}

/**
 * Opens a connection with node-redis (`redis` on npm, kept by Redis itself). It reconnects on its
 * own with backoff; commands sent while it is down fail at once (no offline queue: a caller decides
 * whether to retry, and a blocked reader must not pile up XREADs).
 * node-redis is loaded here, on first connect, not with the module: it is several hundred modules
 * that every process without a Redis URL (most, and every CLI command) would otherwise load.
 */
export async function openRedis(url: string, log: Logger, name: string): Promise<RedisConnection> {
  const { createClient } = await import("redis");
  const client = createClient({
    url,
    disableOfflineQueue: true,
    socket: { connectTimeout: 2000, reconnectStrategy: (retries) => Math.min(50 * 2 ** retries, 1000) },
  });
  let lastLogged = 0;
  client.on("error", (err: Error) => {
    // Reconnects are automatic: one line a few seconds at most, not one per retry.
    if (Date.now() - lastLogged > 5000) log.warn({ err, connection: name }, "redis connection failed; reconnecting");
    lastLogged = Date.now();
  });
  await client.connect();
  return {
    command: <T>(args: Array<string | number>) => client.sendCommand(args.map(String)) as Promise<T>,
    clientId: async () => Number(await client.sendCommand(["CLIENT", "ID"])),
    close: async () => {
      try {
        await client.close();
      } catch {
        client.destroy(); // already broken: drop the socket
      }
    },
  };
}
