import path from "node:path";
import { fileURLToPath } from "node:url";
import type { TestContext } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { startAgentServer, type RunningAgentServer } from "../../src/agent-server/index.ts";
import { createLogger, type Logger } from "../../src/log/logger.ts";
import { bootstrap } from "../../src/platform/bootstrap.ts";
import type { Dialect } from "../../src/store/database.ts";
import { storageSettings } from "../support/dialects.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
export const BASIC_PROJECT = path.join(here, "fixtures/basic");
export const CHAT_EXAMPLE = path.resolve(here, "../../examples/chat-agent");
export const ECHO_EXAMPLE = path.resolve(here, "../../examples/echo-agent");

export interface TestAgentServer extends RunningAgentServer {
  apiKey: string | null;
  client(headers?: Record<string, string>): Client;
  /** Restarts on the same storage (for persistence tests); the old server is stopped first. */
  restart(opts?: { leaseMs?: number; stopFirst?: boolean }): Promise<TestAgentServer>;
}

/**
 * A real agent server on a random loopback port over a fresh store of the dialect, stopped and
 * dropped when the test ends. Returns null when the dialect is unavailable (non-strict mode).
 */
export async function startTestAgentServer(
  t: TestContext,
  options: { dialect?: Dialect; project?: string; open?: boolean; leaseMs?: number; log?: Logger } = {},
): Promise<TestAgentServer | null> {
  const s = await storageSettings(t, options.dialect ?? "sqlite");
  if (!s) return null;
  const servers: RunningAgentServer[] = [];
  let apiKey: string | null = null;
  const start = async (leaseMs?: number): Promise<TestAgentServer> => {
    const running = await startAgentServer({
      projectDir: options.project ?? BASIC_PROJECT,
      host: "127.0.0.1",
      port: 0,
      databaseUrl: s.databaseUrl,
      home: s.home,
      pgSchema: s.pgSchema,
      open: options.open,
      serverId: "test-server",
      leaseMs: leaseMs ?? options.leaseMs,
      log: options.log ?? createLogger({ level: process.env.WHARF_TEST_LOG ?? "silent" }),
    });
    servers.push(running);
    if (apiKey === null && !options.open) apiKey = (await bootstrap(running.server.ctx.db, s.home)).apiKey ?? null;
    const self: TestAgentServer = {
      ...running,
      apiKey,
      client: (headers = {}) => new Client({ apiUrl: running.url, apiKey: null, defaultHeaders: { ...(apiKey && !options.open ? { "x-api-key": apiKey } : {}), ...headers }, callerOptions: { maxRetries: 0 } }),
      restart: async (opts = {}) => {
        if (opts.stopFirst !== false) await running.stop();
        return start(opts.leaseMs);
      },
    };
    return self;
  };
  t.after(async () => {
    for (const r of servers.reverse()) await r.stop().catch(() => {});
    await s.dropSchema();
  });
  return start();
}

/** Collects an SDK stream into a list of {event, data}. */
export async function collect<T>(stream: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const x of stream) out.push(x);
  return out;
}

/** A logger whose JSON lines are kept in memory (to assert on what the server logged). */
export function memoryLogger(): { log: Logger; lines: () => Array<Record<string, unknown>> } {
  const chunks: string[] = [];
  const log = createLogger({ level: "debug", destination: { write: (s: string) => void chunks.push(s) } });
  return { log, lines: () => chunks.join("").split("\n").filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>) };
}
