import type { Router } from "../../http/route.ts";
import type { PlatformContext } from "../../platform/context.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import { registerCreateRoute } from "./box-create.ts";
import { registerBoxRoutes } from "./box-routes.ts";
import { registerPowerRoutes } from "./power-routes.ts";
import { registerSnapshotRoutes } from "./snapshot-routes.ts";

/** The control plane's sandbox and snapshot routes, one registrar per resource, in this order. */
export function registerSandboxRoutes(router: Router, ctx: PlatformContext, manager: SandboxManager): void {
  registerCreateRoute(router, ctx, manager);
  registerBoxRoutes(router, ctx, manager);
  registerPowerRoutes(router, ctx, manager);
  registerSnapshotRoutes(router, ctx, manager);
}
