import type { Router } from "../../http/route.ts";
import type { PlatformContext } from "../../platform/context.ts";
import type { RolloutEngine } from "../rollout/rollout-engine.ts";
import { registerCreateRoute } from "./deployment-create-route.ts";
import { registerBulkDeleteRoute, registerDeleteRoute } from "./deployment-delete-routes.ts";
import { registerPatchRoute } from "./deployment-patch-route.ts";
import {
  registerDeploymentUploadUrlRoute,
  registerGetRoute,
  registerListRoute,
  registerUploadUrlRoute,
} from "./deployment-routes.ts";
import { registerEgressLogRoute } from "./egress-log-route.ts";
import { registerRevisionLogRoutes } from "./revision-log-routes.ts";
import { registerRevisionRoutes } from "./revision-routes.ts";
import { routeDeps } from "./route-support.ts";

/** `/v2/deployments` and everything under it, one registrar per resource (in the order they are listed). */
export function registerDeploymentRoutes(router: Router, ctx: PlatformContext, engine: () => RolloutEngine): void {
  const d = routeDeps(router, ctx, engine);
  registerUploadUrlRoute(d);
  registerCreateRoute(d);
  registerListRoute(d);
  registerBulkDeleteRoute(d);
  registerGetRoute(d);
  registerPatchRoute(d);
  registerDeleteRoute(d);
  registerDeploymentUploadUrlRoute(d);
  registerRevisionRoutes(d);
  registerEgressLogRoute(router, ctx);
  registerRevisionLogRoutes(d);
}
