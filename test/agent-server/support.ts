import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { TestContext } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { startAgentServer, type RunningAgentServer } from "../../src/agent-server/index.ts";
import { createLogger, type Logger } from "../../src/log/logger.ts";
import { bootstrap } from "../../src/platform/bootstrap.ts";
import type { Dialect } from "../../src/store/database.ts";
import { storageSettings } from "../support/dialects.ts";
import { POSTGRES_URL, postgresReachable, requireCapability } from "../support/requirements.ts";
import { egressWebhookGate, type WebhookGate } from "../../src/agent-server/runs/webhook.ts";

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
  options: {
    dialect?: Dialect;
    project?: string;
    open?: boolean;
    leaseMs?: number;
    log?: Logger;
    webhookGate?: WebhookGate;
    runSlots?: number;
  } = {},
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
      webhookGate: options.webhookGate,
      runSlots: options.runSlots,
      log: options.log ?? createLogger({ level: process.env.WHARF_TEST_LOG ?? "silent" }),
    });
    servers.push(running);
    if (apiKey === null && !options.open) apiKey = (await bootstrap(running.server.ctx.db, s.home)).apiKey ?? null;
    const self: TestAgentServer = {
      ...running,
      apiKey,
      client: (headers = {}) =>
        new Client({
          apiUrl: running.url,
          apiKey: null,
          defaultHeaders: { ...(apiKey && !options.open ? { "x-api-key": apiKey } : {}), ...headers },
          callerOptions: { maxRetries: 0 },
        }),
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

/**
 * One agent server for the tests of a file or suite that each add only data of their own (threads,
 * runs, store items): a start with Python graphs waits for a worker to import langgraph (seconds,
 * more on a loaded machine). The first test that asks starts it; `close` (from the suite's `after`)
 * stops it and drops its storage. A test that needs a fresh server still starts its own.
 */
export function sharedAgentServer(options: Parameters<typeof startTestAgentServer>[1] = {}) {
  const cleanups: Array<() => unknown> = [];
  const scope = { after: (fn: () => unknown) => void cleanups.push(fn) } as unknown as TestContext;
  let server: Promise<TestAgentServer | null> | null = null;
  return {
    async get(t: TestContext): Promise<TestAgentServer | null> {
      // Checked on each test, which is skipped (failed in strict mode) as with a server of its own.
      if (
        options.dialect === "postgres" &&
        !requireCapability(t, await postgresReachable(), `PostgreSQL is not reachable at ${POSTGRES_URL}`)
      )
        return null;
      server ??= startTestAgentServer(scope, options);
      return server;
    },
    async close(): Promise<void> {
      for (const fn of cleanups.reverse()) await fn();
    },
  };
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
  return {
    log,
    lines: () =>
      chunks
        .join("")
        .split("\n")
        .filter(Boolean)
        .map((l) => JSON.parse(l) as Record<string, unknown>),
  };
}

/** The egress address policy for webhooks with the tests' loopback receivers allowed, as an operator would. */
export const loopbackHooks = egressWebhookGate({
  WHARF_EGRESS_HOSTS: "",
  WHARF_EGRESS_ALLOW_INTERNAL: ["127.0.0.1/32"],
  WHARF_EGRESS_SYSTEM_DNS: false,
});

/** A loopback webhook receiver: the run each call posts when it ends. */
export async function webhookSink(t: TestContext): Promise<{ url: string; received: Array<Record<string, any>> }> {
  const received: Array<Record<string, any>> = [];
  const server = http.createServer((req, res) => {
    let data = "";
    req.on("data", (c) => (data += c));
    req.on("end", () => {
      received.push(JSON.parse(data));
      res.end("ok");
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`, received };
}
