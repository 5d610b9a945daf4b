import type { Feature, PlatformContext } from "../platform/context.ts";
import { DATAPLANE_PREFIX, registerDataplane } from "./dataplane/dataplane.ts";
import { attachExecuteWebSocket } from "./dataplane/dataplane-ws.ts";
import { LocalDriver } from "./driver/local-driver.ts";
import { registerDownloadUrlRoute, serveDownloadLinks } from "./dataplane/downloads.ts";
import { SandboxManager } from "./lifecycle/manager.ts";
import { registerImageSnapshotRoute } from "./images/images.ts";
import { registerRegistryRoutes } from "./images/registries.ts";
import { registerSandboxRoutes } from "./api/routes.ts";
import {
  proxyServiceUpgrades,
  registerServiceUrlRoute,
  SERVICE_PREFIX,
  serveServiceUrls,
} from "./links/service-urls.ts";
import { loadSandboxSettings, sandboxSettingsFrom } from "./settings.ts";
import { sandboxWorkloadOwner } from "./workload-owner.ts";

/**
 * Sandboxes: `/v2/sandboxes/...` (control plane), `/sandboxes/dp/{id}/...` (data plane, incl. the
 * execute WebSocket), a lifecycle loop, and the local driver. Settings come from the declared
 * `ctx.config.settings`; `env` (tests) replaces them with WHARF_SANDBOX_* values of its own.
 */
export function createSandboxesFeature(
  env?: Record<string, string | undefined>,
): Feature & { manager(): SandboxManager | null } {
  let manager: SandboxManager | null = null;
  const managerFor = (ctx: PlatformContext): SandboxManager => {
    if (manager) return manager;
    const settings = env
      ? loadSandboxSettings(ctx.config.home, env)
      : sandboxSettingsFrom(ctx.config.settings, ctx.config.home);
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
    workloadOwner: sandboxWorkloadOwner,
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
