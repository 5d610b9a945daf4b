import type { Feature, PlatformContext } from "../platform/context.ts";
import { pruneAuthRequests, type FlowDeps } from "./auth-flow.ts";
import { registerConnectionRoutes } from "./connection-routes.ts";
import { registerFlowRoutes } from "./flow-routes.ts";
import { registerProviderRoutes } from "./provider-routes.ts";
import { loadConnectionSettings, type ConnectionSettings } from "./settings.ts";
import { TokenRefresher } from "./token-refresh.ts";
import { registerTokenRoutes } from "./token-routes.ts";

/** A browser cannot reach 0.0.0.0 or [::]: point redirect URIs at loopback instead. */
const browsable = (url: string) => url.replace("//0.0.0.0:", "//127.0.0.1:").replace("//[::]:", "//[::1]:");

/**
 * OAuth providers, the connect flow, the token vault with refresh, and agent connections, under
 * `/v2/auth`. A fresh instance per platform (features.ts calls the factory), because it holds the
 * platform's refresher and sweep timer.
 */
export function createConnectionsFeature(overrides: Partial<ConnectionSettings> = {}): Feature {
  let deps: FlowDeps | null = null;
  let timer: NodeJS.Timeout | null = null;
  let sweeping: Promise<void> | null = null;
  let stopping = false;

  const depsFor = (ctx: PlatformContext): FlowDeps => {
    if (deps) return deps;
    const settings = { ...loadConnectionSettings(ctx.config.settings), ...overrides };
    deps = {
      db: ctx.db,
      box: ctx.box,
      log: ctx.log.child({ feature: "connections" }),
      settings,
      refresher: new TokenRefresher(ctx.db, ctx.box, ctx.log.child({ feature: "connections" }), settings),
      publicBaseUrl: () => settings.publicUrl ?? browsable(ctx.baseUrl()),
      stopping: () => stopping,
    };
    return deps;
  };

  return {
    name: "connections",
    routes(router, ctx) {
      const d = depsFor(ctx);
      registerProviderRoutes(router, d);
      registerFlowRoutes(router, d);
      registerTokenRoutes(router, d);
      registerConnectionRoutes(router, d);
    },
    async start(ctx) {
      const d = depsFor(ctx);
      if (d.settings.sweepIntervalSeconds <= 0) return;
      const sweep = async () => {
        await d.refresher.sweep();
        await pruneAuthRequests(d.db);
      };
      timer = setInterval(() => {
        if (sweeping || stopping) return;
        sweeping = sweep()
          .catch((err) => d.log.warn({ err }, "connections sweep failed"))
          .finally(() => (sweeping = null));
      }, d.settings.sweepIntervalSeconds * 1000);
      timer.unref();
    },
    async stop() {
      stopping = true;
      if (timer) clearInterval(timer);
      await sweeping;
    },
  };
}
