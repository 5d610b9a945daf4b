import crypto from "node:crypto";
import fs from "node:fs";
import type http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
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
import { openCheckpointer, type Checkpointer } from "./storage/checkpointer.ts";
import type { AgentEnv, AgentServerContext } from "./context.ts";
import { CronScheduler } from "./crons/cron-scheduler.ts";
import { egressWebhookGate, type WebhookGate } from "./runs/webhook.ts";
import { CustomAuth } from "./auth/custom-auth.ts";
import { loadGraphs, type LoadedGraph } from "./project/graphs.ts";
import { assertSupportedLangGraph } from "./project/langgraph-version.ts";
import { pythonStoreBatch, startPythonRuntime, type PythonLaunch, type PythonStoreOp } from "./python/index.ts";
import { pythonSettings } from "./python/prestart.ts";
import { registerSdkLogger } from "./project/sdk-logger.ts";
import { loadHttpApp } from "./project/http-app.ts";
import { buildUiBundles } from "./project/ui-bundles.ts";
import { graphConfigFromEnv } from "./project/graph-config.ts";
import { loadEmbed } from "./storage/store-index.ts";
import { parseJson } from "./storage/json-columns.ts";
import { TtlSweeper } from "./storage/ttl-sweeper.ts";
import { applyProjectEnv, loadProject, type AgentProject } from "./project/project.ts";
import { RunEngine } from "./runs/run-engine.ts";
import { attachProtocolUpgrades } from "./protocol/index.ts";
import { AgentStore } from "./storage/store.ts";
import { GraphSchemaCache } from "./project/static-schemas.ts";
import { needsStaticSchemas } from "./project/graph-schemas.ts";
import { RunEventBus } from "../cluster/index.ts";

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
  // Before importing any graph: an unsupported LangGraph line is refused with one clear line.
  assertSupportedLangGraph(project.graphs.filter((g) => g.runtime === "js").map((g) => g.file));
  const js = await loadGraphs(project);
  const schemas = new GraphSchemaCache(
    project.dir,
    project.graphs,
    path.join(options.home, "graph-schemas"),
    options.log,
  );
  // Started before the rest of the start-up: the type checker runs alongside it in its own process.
  if (options.warmSchemas) void warmSchemas(schemas, js.graphs);
  for (const [graphId, f] of js.failures)
    options.log.error(
      { graphId, module: f.module, error: f.error },
      `graph "${graphId}" did not load (${f.module}): ${f.error}; the other graphs still serve`,
    );
  for (const w of project.warnings) options.log.warn({ configFile: project.configFile }, `langgraph.json: ${w}`);
  const jsAuth = project.auth?.runtime === "python" ? null : await CustomAuth.load(project);
  const userApp = await loadHttpApp(project);
  const ui = await buildUiBundles(project.ui, options.log);
  const graphConfig = graphConfigFromEnv(hostVariable("LANGGRAPH_CONFIG"));
  const python = await startPythonRuntime(
    {
      project,
      home: options.home,
      databaseUrl: options.databaseUrl,
      pgSchema: options.pgSchema,
      ...pythonSettings(options.home),
      log: options.log,
    },
    options.earlyPython,
  );
  const idx = project.store.index;
  const embed = !idx ? null : idx.embed.runtime === "python" ? (python?.embed ?? null) : await loadEmbed(idx.embed);
  if (idx && !embed)
    options.log.warn(
      { embed: idx.embed.ref },
      `store.index.embed "${idx.embed.ref}" did not load in the Python worker: semantic search is off`,
    );
  const index = idx && embed ? { dims: idx.dims, fields: idx.fields, embed } : null;
  // Ordered as in langgraph.json, whichever runtime serves each graph.
  const graphs = new Map(
    project.graphs.flatMap((g) => {
      const loaded = js.graphs.get(g.graphId) ?? python?.graphs.get(g.graphId);
      return loaded ? [[g.graphId, loaded] as const] : [];
    }),
  );
  const failures = new Map([...js.failures, ...(python?.failures ?? [])]);
  const customAuth = python?.auth ?? jsAuth;
  for (const [graphId, f] of python?.failures ?? [])
    options.log.error(
      { graphId, module: f.module, error: f.error },
      `python graph "${graphId}" did not load (${f.module}): ${f.error}; the other graphs still serve`,
    );
  const leaseMs = options.leaseMs ?? readSetting("WHARF_RUN_LEASE_MS");
  const checkpointer: Checkpointer = await openCheckpointer({
    databaseUrl: options.databaseUrl,
    home: options.home,
    pgSchema: options.pgSchema,
    leaseMs,
  });
  const serverId = options.serverId ?? defaultServerId(project);
  const tickMs = options.cronTickMs ?? readSetting("WHARF_CRON_TICK_MS");
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
    pythonApp: python?.http ?? null,
    ui,
    schemas,
  };
  // Python graphs read and write the same store as the API and the JS graphs.
  python?.worker.serve("store.batch", (ops) => pythonStoreBatch(ctx.store, ops as PythonStoreOp[]));
  // A Python graph's checkpoints carry its thread's metadata, as on the Python server.
  const threadMetadata = async (threadId: string) => {
    const row = await ctx.db
      .selectFrom("agent_threads")
      .select("metadata")
      .where("thread_id", "=", threadId)
      .where("server_id", "=", serverId)
      .executeTakeFirst();
    return parseJson<Record<string, unknown>>(row?.metadata, {});
  };
  for (const g of python?.graphs.values() ?? []) g.threadMetadata = threadMetadata;
  try {
    await ensureSystemAssistants(ctx, graphConfig);
  } catch (err) {
    await python?.worker.stop();
    await checkpointer.close();
    throw err;
  }
  const webhookGate = options.webhookGate === undefined ? defaultWebhookGate() : options.webhookGate;
  // Replicas (PostgreSQL + REDIS_URL): run events through Redis Streams, any replica serves any stream.
  const redisUrl = readSetting("REDIS_URL");
  let bus: RunEventBus | null = null;
  try {
    if (redisUrl && ctx.dialect !== "postgres")
      throw new Error(
        "REDIS_URL needs DATABASE_URL to be PostgreSQL (replicas share runs through it); with SQLite Wharf runs as one process without Redis",
      );
    if (redisUrl) bus = await RunEventBus.open(redisUrl, options.log);
  } catch (err) {
    await python?.worker.stop();
    await checkpointer.close();
    throw new Error(`cannot open redis for run events: ${(err as Error).message}`, { cause: err });
  }
  const engine = new RunEngine(ctx, {
    leaseMs,
    apiUrl: options.apiUrl,
    databaseUrl: options.databaseUrl,
    signalSecret: options.signalSecret,
    webhookGate,
    bus,
    slots: options.runSlots ?? readSetting("WHARF_RUN_SLOTS"),
  });
  try {
    await engine.listen();
  } catch (err) {
    await bus?.close();
    await python?.worker.stop();
    await checkpointer.close();
    throw err;
  }
  if (options.exclusive) {
    const n = await engine.recoverAbandoned();
    if (n)
      options.log.warn(
        { runs: n },
        "runs abandoned by a previous process were settled at start (resumed or ended as error)",
      );
  }
  engine.start();
  const crons = new CronScheduler(ctx, engine, tickMs);
  crons.start();
  const sweeper = new TtlSweeper(ctx, {
    storeMinutes: project.store.ttl?.sweepMinutes ?? null,
    threads: project.checkpointerTtl
      ? {
          strategy: project.checkpointerTtl.strategy,
          ttlMinutes: project.checkpointerTtl.defaultTtlMinutes,
          sweepMinutes: project.checkpointerTtl.sweepMinutes,
        }
      : null,
  });
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
        ctx.schemas.close();
        await crons.stop();
        await sweeper.stop();
        await engine.stop();
        await python?.worker.stop();
        await checkpointer.close();
      })()),
  };
}

/** Starts deriving, in the background, the TypeScript-typed schemas of the graphs that have no runtime schema. */
async function warmSchemas(schemas: GraphSchemaCache, graphs: Map<string, LoadedGraph>): Promise<void> {
  const ids: string[] = [];
  for (const [id, loaded] of graphs)
    if (await needsStaticSchemas(() => loaded.get({ configurable: {} }, null), schemas.fileOf(id))) ids.push(id);
  schemas.warm(ids);
}

/**
 * Webhooks of a server whose connections go through the egress proxy (`WHARF_AGENT_EGRESS_PROXIED`,
 * set by the platform for a confined deployment) are left to the proxy; anywhere else they are
 * checked here against the same egress address policy and the operator's settings.
 */
export function defaultWebhookGate(): WebhookGate {
  if (readSetting("WHARF_AGENT_EGRESS_PROXIED")) return null;
  return egressWebhookGate({
    WHARF_EGRESS_HOSTS: readSetting("WHARF_EGRESS_HOSTS"),
    WHARF_EGRESS_ALLOW_INTERNAL: readSetting("WHARF_EGRESS_ALLOW_INTERNAL"),
    WHARF_EGRESS_SYSTEM_DNS: readSetting("WHARF_EGRESS_SYSTEM_DNS"),
  });
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
