import crypto from "node:crypto";
import fs from "node:fs";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { serve, type ServerType } from "@hono/node-server";
import type { Hono } from "hono";
import { readSetting } from "../config/index.ts";
import { loadKeyring, reloadKeyring } from "../crypto/keyring.ts";
import { SecretBox } from "../crypto/secret-box.ts";
import { createAuthenticator, type Authenticate } from "../http/authenticate.ts";
import { createLogger, type Logger } from "../log/logger.ts";
import { openStore, type Store } from "../store/database.ts";
import { migrateToLatest } from "../store/migrate.ts";
import { buildAgentApp } from "./api/app.ts";
import { ensureSystemAssistants } from "./storage/assistants.ts";
import { openCheckpointer, type Checkpointer } from "./storage/checkpointer.ts";
import type { AgentEnv, AgentServerContext } from "./context.ts";
import { CronScheduler, cronTickMs } from "./crons/cron-scheduler.ts";
import { CustomAuth } from "./auth/custom-auth.ts";
import { loadGraphs } from "./project/graphs.ts";
import { pythonStoreBatch, startPythonRuntime, type PythonStoreOp } from "./python/index.ts";
import { registerSdkLogger } from "./project/sdk-logger.ts";
import { loadHttpApp } from "./project/http-app.ts";
import { buildUiBundles } from "./project/ui-bundles.ts";
import { graphConfigFromEnv } from "./project/graph-config.ts";
import { loadEmbed } from "./storage/store-index.ts";
import { TtlSweeper } from "./storage/ttl-sweeper.ts";
import { applyProjectEnv, loadProject, type AgentProject } from "./project/project.ts";
import { RunEngine } from "./runs/run-engine.ts";
import { AgentStore } from "./storage/store.ts";

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
  /** How long a run's claim holds without its process renewing it (default 30 s). */
  leaseMs?: number;
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

export function defaultServerId(project: AgentProject): string {
  const hash = crypto.createHash("sha256").update(project.configFile).digest("hex").slice(0, 12);
  return `project:${path.basename(project.dir)}:${hash}`;
}

/**
 * Builds the agent server of one project: loads `langgraph.json`, its graphs and auth (failing
 * with the file and the reason), opens the checkpointer, creates the default assistants, and
 * returns the Hono app and its run engine.
 */
export async function createAgentServerApp(options: AgentServerOptions): Promise<AgentServer> {
  const project = typeof options.project === "string" ? loadProject(options.project) : options.project;
  applyProjectEnv(project);
  registerSdkLogger(options.log);
  const js = await loadGraphs(project);
  for (const [graphId, f] of js.failures) options.log.error({ graphId, module: f.module, error: f.error }, `graph "${graphId}" did not load (${f.module}): ${f.error}; the other graphs still serve`);
  for (const w of project.warnings) options.log.warn({ configFile: project.configFile }, `langgraph.json: ${w}`);
  const jsAuth = project.auth?.runtime === "python" ? null : await CustomAuth.load(project);
  const userApp = await loadHttpApp(project);
  const ui = await buildUiBundles(project.ui, options.log);
  const index = project.store.index ? { dims: project.store.index.dims, fields: project.store.index.fields, embed: await loadEmbed(project.store.index.embed) } : null;
  const graphConfig = graphConfigFromEnv(process.env.LANGGRAPH_CONFIG);
  const python = await startPythonRuntime({ project, home: options.home, python: readSetting("WHARF_PYTHON"), envsDir: readSetting("WHARF_PYTHON_ENVS") ?? path.join(options.home, "python-envs"), log: options.log });
  // Ordered as in langgraph.json, whichever runtime serves each graph.
  const graphs = new Map(project.graphs.flatMap((g) => {
    const loaded = js.graphs.get(g.graphId) ?? python?.graphs.get(g.graphId);
    return loaded ? [[g.graphId, loaded] as const] : [];
  }));
  const failures = new Map([...js.failures, ...(python?.failures ?? [])]);
  const customAuth = python?.auth ?? jsAuth;
  for (const [graphId, f] of python?.failures ?? []) options.log.error({ graphId, module: f.module, error: f.error }, `python graph "${graphId}" did not load (${f.module}): ${f.error}; the other graphs still serve`);
  const checkpointer: Checkpointer = await openCheckpointer({ databaseUrl: options.databaseUrl, home: options.home, pgSchema: options.pgSchema });
  const serverId = options.serverId ?? defaultServerId(project);
  const tickMs = options.cronTickMs ?? cronTickMs();
  const ctx: AgentServerContext = {
    serverId,
    db: options.store.db,
    dialect: options.store.dialect,
    graphs,
    python: python?.worker ?? null,
    graphFailures: failures,
    checkpointer,
    store: new AgentStore(options.store.db, options.store.dialect, serverId, { index, ttl: project.store.ttl }),
    customAuth,
    box: options.box,
    authenticate: options.authenticate,
    open: options.open ?? false,
    log: options.log,
    http: project.http,
    userApp,
    ui,
  };
  // Python graphs read and write the same store as the API and the JS graphs.
  python?.worker.serve("store.batch", (ops) => pythonStoreBatch(ctx.store, ops as PythonStoreOp[]));
  try {
    await ensureSystemAssistants(ctx, graphConfig);
  } catch (err) {
    await python?.worker.stop();
    await checkpointer.close();
    throw err;
  }
  const engine = new RunEngine(ctx, { leaseMs: options.leaseMs ?? 30_000, apiUrl: options.apiUrl, databaseUrl: options.databaseUrl, signalSecret: options.signalSecret });
  try {
    await engine.listen();
  } catch (err) {
    await python?.worker.stop();
    await checkpointer.close();
    throw err;
  }
  if (options.exclusive) {
    const n = await engine.recoverAbandoned();
    if (n) options.log.warn({ runs: n }, "runs abandoned by a previous process were settled at start (resumed or ended as error)");
  }
  engine.start();
  const crons = new CronScheduler(ctx, engine, tickMs);
  crons.start();
  const sweeper = new TtlSweeper(ctx, { storeMinutes: project.store.ttl?.sweepMinutes ?? null, threads: project.checkpointerTtl ? { ttlMinutes: project.checkpointerTtl.defaultTtlMinutes, sweepMinutes: project.checkpointerTtl.sweepMinutes } : null });
  sweeper.start();
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
        await crons.stop();
        await sweeper.stop();
        await engine.stop();
        await python?.worker.stop();
        await checkpointer.close();
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
    const box = new SecretBox(loadKeyring(options.home, readSetting("WHARF_MASTER_KEY") ?? null), () => reloadKeyring(options.home, readSetting("WHARF_MASTER_KEY") ?? null));
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
    throw new Error(`cannot listen on ${options.host}:${options.port}: ${err.message}`);
  });
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
