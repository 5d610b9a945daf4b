import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { getRequestListener, serve, type ServerType } from "@hono/node-server";
import type { WharfConfig } from "../config/index.ts";
import { createCluster, type Cluster } from "../cluster/index.ts";
import { loadKeyring, reloadKeyring } from "../crypto/keyring.ts";
import { SecretBox } from "../crypto/secret-box.ts";
import { createAuthenticator } from "../http/authenticate.ts";
import { createHttpApp } from "../http/app.ts";
import { routeTenantUpgrades, tenantRoutedListener } from "../http/tenant-routing.ts";
import { createLogger, type Logger } from "../log/logger.ts";
import { openStore, type Store } from "../store/database.ts";
import { migrateToLatest } from "../store/migrate.ts";
import { bootstrap, type BootstrapResult } from "./bootstrap.ts";
import { hardenServer, serverTimeouts } from "../http/connection-guard.ts";
import type { Feature, PlatformContext } from "./context.ts";
import type { EarlyListener } from "./early-listener.ts";
import { allFeatures } from "./features.ts";

export interface RunningPlatform {
  ctx: PlatformContext;
  url: string;
  bootstrap: BootstrapResult;
  stop(): Promise<void>;
}

export interface StartOptions {
  log?: Logger;
  features?: Feature[];
  /** PostgreSQL schema, for tests that isolate themselves. */
  pgSchema?: string;
  /** A socket already bound (`wharf up` binds it before loading the platform, so `/ok` answers at once). */
  listener?: EarlyListener;
}

/**
 * Runs every feature's `start` concurrently; logs how long each took; the first failure is rethrown.
 * Starts are called in list order, so a feature's synchronous set-up (egress registering the control
 * plane as a forbidden destination) is done before a later feature's first `await`.
 */
async function startFeatures(features: Feature[], ctx: PlatformContext, log: Logger): Promise<void> {
  const results = await Promise.allSettled(
    features.map(async (f) => {
      if (!f.start) return;
      const began = performance.now();
      await f.start(ctx);
      log.debug({ feature: f.name, ms: Math.round(performance.now() - began) }, "feature started");
    }),
  );
  const failed = results.findIndex((r) => r.status === "rejected");
  if (failed >= 0) {
    const reason = (results[failed] as PromiseRejectedResult).reason as Error;
    log.error({ err: reason, feature: features[failed].name }, "feature failed to start");
    throw reason;
  }
}

/** Opens storage, applies migrations, bootstraps identity and serves the control plane. */
export async function startPlatform(config: WharfConfig, options: StartOptions = {}): Promise<RunningPlatform> {
  const log = options.log ?? createLogger({ level: config.logLevel });
  const store = await openMigratedStore(config, options, log);
  const box = new SecretBox(loadKeyring(config.home, config.masterKey), () =>
    reloadKeyring(config.home, config.masterKey),
  );
  const boot = await bootstrap(store.db, config.home);
  const cluster = await joinCluster(config, store, box, log);

  let baseUrl = "";
  const ctx: PlatformContext = {
    config,
    store,
    db: store.db,
    box,
    log,
    authenticate: createAuthenticator(store.db, box),
    baseUrl: () => baseUrl,
    cluster,
  };
  const features = options.features ?? allFeatures();
  const app = createHttpApp(ctx, features);
  const tenantDomain = config.settings.WHARF_TENANT_DOMAIN;
  // Replica mode: workload requests whose owner is another replica go there; one process pays nothing.
  const owners = cluster ? features.flatMap((f) => (f.workloadOwner ? [f.workloadOwner(ctx)] : [])) : [];
  const publicListener = (l: http.RequestListener): http.RequestListener =>
    cluster ? cluster.wrapListener(l, owners) : l;
  const listening: Listening = { ctx, cluster, app, features, tenantDomain, owners, publicListener };

  const server = await openServer(listening, options);
  // Before any feature's handlers: a connection past the caps is closed before anything sees it.
  hardenServer(server as http.Server, config.settings, log);
  baseUrl = serverUrl(server);
  routeServer(server, listening, options.listener);
  await serveInternal(server, listening);
  log.info({ url: baseUrl, uptime_ms: Math.round(process.uptime() * 1000) }, "control plane serving");

  // The control plane already answers (`/ok` included) while the features recover what a previous
  // process left (sandboxes to re-adopt, rollouts to resume, runs to settle): they start side by
  // side, so one slow recovery does not hold the others back.
  await startFeaturesOrUnwind(server, listening);
  return { ctx, url: baseUrl, bootstrap: boot, stop: stopOnce(server, listening) };
}

/** The platform's storage, opened and migrated to the latest schema (closed again if that fails). */
async function openMigratedStore(config: WharfConfig, options: StartOptions, log: Logger): Promise<Store> {
  fs.mkdirSync(config.home, { recursive: true, mode: 0o700 });
  const store: Store = await openStore({
    databaseUrl: config.databaseUrl,
    home: config.home,
    pgSchema: options.pgSchema,
  });
  try {
    const applied = await migrateToLatest(store);
    if (applied.length) log.info({ applied }, "database migrations applied");
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}

/** The replicas this process joins (null when it runs alone); storage is closed if that fails. */
async function joinCluster(config: WharfConfig, store: Store, box: SecretBox, log: Logger): Promise<Cluster | null> {
  try {
    return createCluster(config, store, box, log);
  } catch (err) {
    await store.close();
    throw err;
  }
}

/** What serving the control plane needs: the context, the app, its features and who owns which workload. */
interface Listening {
  ctx: PlatformContext;
  cluster: Cluster | null;
  app: ReturnType<typeof createHttpApp>;
  features: Feature[];
  tenantDomain: WharfConfig["settings"]["WHARF_TENANT_DOMAIN"];
  owners: ReturnType<NonNullable<Feature["workloadOwner"]>>[];
  publicListener: (l: http.RequestListener) => http.RequestListener;
}

/** The public server: the socket `wharf up` already bound, or a new one listening on the configured address. */
async function openServer(l: Listening, options: StartOptions): Promise<ServerType> {
  if (options.listener) return options.listener.server;
  const { config, store } = l.ctx;
  return new Promise<ServerType>((resolve, reject) => {
    const createServer = (opts: http.ServerOptions, listener: http.RequestListener) =>
      http.createServer(opts, tenantRoutedListener(l.publicListener(listener), l.tenantDomain));
    const s = serve(
      {
        fetch: l.app.fetch,
        hostname: config.host,
        port: config.port,
        serverOptions: serverTimeouts(config.settings),
        createServer: createServer as never,
      },
      () => resolve(s),
    );
    s.once("error", reject);
  }).catch(async (err: Error) => {
    await store.close();
    throw new Error(`cannot listen on ${config.host}:${config.port}: ${err.message}`, { cause: err });
  });
}

/** The server's own URL, from the address it listens on. */
function serverUrl(server: ServerType): string {
  const addr = server.address() as AddressInfo;
  return `http://${addr.family === "IPv6" ? `[${addr.address}]` : addr.address}:${addr.port}`;
}

/** Routes the public server's upgrades and requests: tenants, other replicas' workloads, the features. */
function routeServer(server: ServerType, l: Listening, early: EarlyListener | undefined): void {
  const { ctx, cluster, features, tenantDomain, owners } = l;
  routeTenantUpgrades(server as http.Server, tenantDomain);
  cluster?.interceptUpgrades(server as http.Server, owners);
  for (const f of features) f.onServer?.(server as http.Server, ctx);
  early?.attach(tenantRoutedListener(l.publicListener(getRequestListener(l.app.fetch)), tenantDomain));
}

/** Replica mode: the internal listener other replicas reach (the public server is closed if it fails). */
async function serveInternal(server: ServerType, l: Listening): Promise<void> {
  const { ctx, cluster, features } = l;
  if (!cluster) return;
  try {
    await cluster.serveInternal(getRequestListener(l.app.fetch), (internal) => {
      for (const f of features) f.onServer?.(internal, ctx);
    });
  } catch (err) {
    server.close();
    await ctx.store.close();
    throw err;
  }
}

/** Starts the features; if one fails, everything started so far is stopped and storage closed. */
async function startFeaturesOrUnwind(server: ServerType, l: Listening): Promise<void> {
  const { ctx, cluster, features } = l;
  const log = ctx.log;
  try {
    await startFeatures(features, ctx, log);
  } catch (err) {
    server.close();
    await cluster?.stop();
    for (const f of [...features].reverse())
      await f.stop?.().catch((e) => log.error({ err: e, feature: f.name }, "feature stop after a failed start failed"));
    await ctx.store.close();
    throw err;
  }
}

/** The platform's stop, run once however often it is called. */
function stopOnce(server: ServerType, l: Listening): () => Promise<void> {
  const { ctx, cluster, features } = l;
  const log = ctx.log;
  let stopping: Promise<void> | null = null;
  return () =>
    (stopping ??= (async () => {
      // Stop accepting, let in-flight requests finish (bounded), then release storage.
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      if ("closeIdleConnections" in server) (server as { closeIdleConnections(): void }).closeIdleConnections();
      const deadline = new Promise<void>((resolve) => setTimeout(resolve, 10_000).unref());
      for (const f of [...features].reverse())
        await f.stop?.().catch((err) => log.error({ err, feature: f.name }, "feature stop failed"));
      await Promise.race([closed, deadline]);
      if ("closeAllConnections" in server) (server as { closeAllConnections(): void }).closeAllConnections();
      await cluster?.stop();
      await ctx.store.close();
    })());
}
