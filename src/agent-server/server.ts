import fs from "node:fs";
import type http from "node:http";
import type { AddressInfo } from "node:net";
import { serve, type ServerType } from "@hono/node-server";
import type { Hono } from "hono";
import { hostVariable, readSetting } from "../config/index.ts";
import { loadKeyring, reloadKeyring } from "../crypto/keyring.ts";
import { SecretBox } from "../crypto/secret-box.ts";
import { createAuthenticator, type Authenticate } from "../http/authenticate.ts";
import { createLogger, type Logger } from "../log/logger.ts";
import { openStore, type Store } from "../store/database.ts";
import { migrateToLatest } from "../store/migrate.ts";
import { buildAgentApp } from "./api/app.ts";
import { ensureSystemAssistants } from "./storage/assistants.ts";
import type { AgentEnv, AgentServerContext } from "./context.ts";
import type { CronScheduler } from "./crons/cron-scheduler.ts";
import type { WebhookGate } from "./runs/webhook.ts";
import { assertSupportedLangGraph } from "./project/langgraph-version.ts";
import type { PythonLaunch } from "./python/index.ts";
import { registerSdkLogger } from "./project/sdk-logger.ts";
import { graphConfigFromEnv } from "./project/graph-config.ts";
import type { TtlSweeper } from "./storage/ttl-sweeper.ts";
import { applyProjectEnv, loadProject, type AgentProject } from "./project/project.ts";
import type { RunEngine } from "./runs/run-engine.ts";
import { attachProtocolUpgrades } from "./protocol/index.ts";
import { addPythonSide, loadJsSide } from "./server-graphs.ts";
import { defaultServerId, openServerContext } from "./server-context.ts";
import { startRuns } from "./server-runs.ts";

export interface AgentServerOptions {
  /** The project folder (with `langgraph.json`) or an already loaded project. */
  project: string | AgentProject;
  store: Store;
  box: SecretBox;
  /** The platform's credential check; requests need a valid API key unless `open` or custom auth. */
  authenticate: Authenticate | null;
  log: Logger;
  /** Which project/deployment the rows belong to; default derived from the project's path. */
  serverId?: string;
  /** `wharf dev`: no credentials required (only ever on loopback). */
  open?: boolean;
  /** Where checkpoints go: the platform database's server when PostgreSQL, else `$home/agent-checkpoints.db`. */
  home: string;
  databaseUrl: string | null;
  pgSchema?: string;
  /** How long a run's claim holds without its process renewing it (default `WHARF_RUN_LEASE_MS`). */
  leaseMs?: number;
  /** Runs executing at once in this process (default `WHARF_RUN_SLOTS`). */
  runSlots?: number;
  /**
   * No other live process serves this server id (a deployment revision's only process, restarted
   * after a crash): runs still marked running at start are settled at once (resumed or `error`).
   */
  exclusive?: boolean;
  /** The URL the server is reachable at (for `langgraph_api_url` in run metadata). */
  apiUrl?: () => string;
  /**
   * A secret every process of this server id shares (a deployment's agent key): names the
   * PostgreSQL channel of cross-process cancels, so servers of other tenants on the same database
   * can neither see nor send them (see run-signals.ts).
   */
  signalSecret?: string;
  /** How often the cron scheduler looks for due crons (default `WHARF_CRON_TICK_MS`, else 5 s). */
  cronTickMs?: number;
  /**
   * Derive the graphs' schemas from their TypeScript types in the background at start (`wharf dev`),
   * so the first `/assistants/{id}/schemas` (Studio asks at once) does not wait for the checker.
   * Elsewhere they are derived on the first request that needs them, as the LangGraph server does.
   */
  warmSchemas?: boolean;
  /** Where runs' webhooks may go (default: the egress address policy from the settings, see defaultWebhookGate). */
  webhookGate?: WebhookGate;
  /** The project's Python workers, already launched for this project (`prestartPython`). */
  earlyPython?: Promise<PythonLaunch | null>;
}

export interface AgentServer {
  app: Hono<AgentEnv>;
  ctx: AgentServerContext;
  engine: RunEngine;
  crons: CronScheduler;
  /** `store.ttl` / `checkpointer.ttl` sweeps (timers; callable directly). */
  sweeper: TtlSweeper;
  project: AgentProject;
  /** Stops the cron scheduler, ends runs in flight (as errors), closes the checkpointer. The store stays open (the caller owns it). */
  close(): Promise<void>;
}

export { defaultServerId };

/**
 * Builds the agent server of one project: loads `langgraph.json`, its graphs and auth (failing
 * with the file and the reason), opens the checkpointer, creates the default assistants, and
 * returns the Hono app and its run engine.
 */
export async function createAgentServerApp(options: AgentServerOptions): Promise<AgentServer> {
  const project = typeof options.project === "string" ? loadProject(options.project) : options.project;
  applyProjectEnv(project);
  registerSdkLogger(options.log);
  // Before importing any graph: an unsupported LangGraph line is refused with one clear line.
  assertSupportedLangGraph(project.graphs.filter((g) => g.runtime === "js").map((g) => g.file));
  const jsSide = await loadJsSide(project, options);
  const graphConfig = graphConfigFromEnv(hostVariable("LANGGRAPH_CONFIG"));
  const code = await addPythonSide(project, options, jsSide);
  const { ctx, checkpointer, leaseMs, tickMs } = await openServerContext(project, options, code);
  const python = code.python;
  const release = async () => {
    await python?.worker.stop();
    await checkpointer.close();
  };
  try {
    await ensureSystemAssistants(ctx, graphConfig);
  } catch (err) {
    await release();
    throw err;
  }
  const { engine, crons, sweeper } = await startRuns(ctx, project, options, { leaseMs, tickMs, release });
  const app = buildAgentApp(ctx, engine);
  let closing: Promise<void> | null = null;
  return {
    app,
    ctx,
    engine,
    crons,
    sweeper,
    project,
    close: () =>
      (closing ??= (async () => {
        ctx.schemas.close();
        await crons.stop();
        await sweeper.stop();
        await engine.stop();
        await release();
      })()),
  };
}

export interface StandaloneOptions {
  projectDir: string;
  host: string;
  port: number;
  databaseUrl: string | null;
  home: string;
  open?: boolean;
  serverId?: string;
  pgSchema?: string;
  log?: Logger;
  leaseMs?: number;
  exclusive?: boolean;
  webhookGate?: WebhookGate;
  /** See AgentServerOptions.warmSchemas. */
  warmSchemas?: boolean;
  /** See AgentServerOptions.runSlots. */
  runSlots?: number;
  /** See AgentServerOptions.earlyPython. */
  earlyPython?: Promise<PythonLaunch | null>;
}

export interface RunningAgentServer {
  url: string;
  server: AgentServer;
  stop(): Promise<void>;
}

/** Serves one project as its own process (`wharf dev`, `wharf agent-server`, a deployment revision). */
export async function startAgentServer(options: StandaloneOptions): Promise<RunningAgentServer> {
  const log = options.log ?? createLogger({ level: readSetting("WHARF_LOG_LEVEL") });
  fs.mkdirSync(options.home, { recursive: true, mode: 0o700 });
  const store = await openStore({ databaseUrl: options.databaseUrl, home: options.home, pgSchema: options.pgSchema });
  let url = "";
  let agent: AgentServer;
  try {
    await migrateToLatest(store);
    const box = new SecretBox(loadKeyring(options.home, readSetting("WHARF_MASTER_KEY") ?? null), () =>
      reloadKeyring(options.home, readSetting("WHARF_MASTER_KEY") ?? null),
    );
    agent = await createAgentServerApp({
      project: options.projectDir,
      store,
      box,
      authenticate: createAuthenticator(store.db, box),
      log,
      serverId: options.serverId,
      open: options.open,
      home: options.home,
      databaseUrl: options.databaseUrl,
      pgSchema: options.pgSchema,
      leaseMs: options.leaseMs,
      exclusive: options.exclusive,
      webhookGate: options.webhookGate,
      warmSchemas: options.warmSchemas,
      runSlots: options.runSlots,
      earlyPython: options.earlyPython,
      apiUrl: () => url,
    });
  } catch (err) {
    await store.close();
    throw err;
  }
  const server = await new Promise<ServerType>((resolve, reject) => {
    const s = serve({ fetch: agent.app.fetch, hostname: options.host, port: options.port }, () => resolve(s));
    s.once("error", reject);
  }).catch(async (err: Error) => {
    await agent.close();
    await store.close();
    throw new Error(`cannot listen on ${options.host}:${options.port}: ${err.message}`, { cause: err });
  });
  attachProtocolUpgrades(server as http.Server, agent);
  const addr = server.address() as AddressInfo;
  url = `http://${addr.family === "IPv6" ? `[${addr.address}]` : addr.address}:${addr.port}`;
  // The SDK's `new Client()` without `apiUrl`, in a graph or the project's routes, talks to this
  // server, as in the LangGraph server (one project per process here, so a process-wide default).
  (globalThis as Record<symbol, unknown>)[Symbol.for("langgraph_api:url")] = url;
  let stopping: Promise<void> | null = null;
  return {
    url,
    server: agent,
    stop: () =>
      (stopping ??= (async () => {
        const closed = new Promise<void>((resolve) => server.close(() => resolve()));
        await agent.close();
        if ("closeIdleConnections" in server) (server as { closeIdleConnections(): void }).closeIdleConnections();
        await Promise.race([closed, new Promise((r) => setTimeout(r, 3000).unref())]);
        if ("closeAllConnections" in server) (server as { closeAllConnections(): void }).closeAllConnections();
        await store.close();
      })()),
  };
}
