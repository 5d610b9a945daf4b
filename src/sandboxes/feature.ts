import type { Feature, PlatformContext } from "../platform/context.ts";
import { DATAPLANE_PREFIX, registerDataplane } from "./dataplane.ts";
import { attachExecuteWebSocket } from "./dataplane-ws.ts";
import { LocalDriver } from "./driver/local-driver.ts";
import { registerDownloadUrlRoute, serveDownloadLinks } from "./downloads.ts";
import { SandboxManager } from "./manager.ts";
import { registerImageSnapshotRoute } from "./images.ts";
import { registerRegistryRoutes } from "./registries.ts";
import { registerSandboxRoutes } from "./routes.ts";
import { proxyServiceUpgrades, registerServiceUrlRoute, SERVICE_PREFIX, serveServiceUrls } from "./service-urls.ts";
import { loadSandboxSettings } from "./settings.ts";

/**
 * Sandboxes: `/v2/sandboxes/...` (control plane), `/sandboxes/dp/{id}/...` (data plane, incl. the
 * execute WebSocket), a lifecycle loop, and the local driver. `env` overrides the process
 * environment for the WHARF_SANDBOX_* settings (tests).
 */
export function createSandboxesFeature(env: NodeJS.ProcessEnv = process.env): Feature & { manager(): SandboxManager | null } {
  let manager: SandboxManager | null = null;
  const managerFor = (ctx: PlatformContext): SandboxManager => {
    if (manager) return manager;
    const settings = loadSandboxSettings(ctx.config.home, env);
    const driver =
      settings.driver === "local"
        ? new LocalDriver({
            stateDir: settings.stateDir,
            baseCacheDir: settings.baseCacheDir,
            hostUid: settings.hostUid,
            pidsMax: settings.pidsMax,
            diskImages: settings.disk === "image",
            log: (msg, extra) => ctx.log.info(extra ?? {}, msg),
          })
        : null;
    manager = new SandboxManager(ctx, driver, settings);
    return manager;
  };
  return {
    name: "sandboxes",
    // File uploads and requests to a sandbox's own services stream their bodies.
    streamedBodies: [new RegExp(`^${DATAPLANE_PREFIX}/[^/]+/upload$`), new RegExp(`^${SERVICE_PREFIX}/`)],
    manager: () => manager,
    routes(router, ctx) {
      registerSandboxRoutes(router, ctx, managerFor(ctx));
      registerDownloadUrlRoute(router, ctx);
      registerServiceUrlRoute(router, ctx);
      registerRegistryRoutes(router, ctx);
      registerImageSnapshotRoute(router, ctx, managerFor(ctx));
    },
    rootRoutes(app, ctx) {
      registerDataplane(app, ctx, managerFor(ctx));
      serveDownloadLinks(app, ctx, managerFor(ctx));
      serveServiceUrls(app, ctx, managerFor(ctx));
    },
    onServer(server, ctx) {
      attachExecuteWebSocket(server, ctx, managerFor(ctx));
      proxyServiceUpgrades(server, ctx, managerFor(ctx));
    },
    async start(ctx) {
      const m = managerFor(ctx);
      // Build the base image in the background: the first create waits for it, start-up does not.
      void m.prepare();
      await m.startLoop();
    },
    async stop() {
      await manager?.shutdown();
    },
  };
}
