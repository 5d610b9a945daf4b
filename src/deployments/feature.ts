import type { Feature, PlatformContext } from "../platform/context.ts";
import { mountDeploymentProxy } from "./api/proxy.ts";
import { RolloutEngine } from "./rollout/rollout-engine.ts";
import type { DeploymentsOptions } from "./rollout/options.ts";
import { registerDeploymentRoutes } from "./api/routes.ts";
import { registerProjectLogRoutes } from "./api/project-log-routes.ts";
import { storeUpload, UploadTooLarge, verifyUploadToken } from "./api/upload-urls.ts";
import { UploadQuotaExceeded } from "./api/upload-quota.ts";
import { Housekeeping, uploadLimits } from "./housekeeping.ts";
import { revisionOwner } from "./api/revision-owner.ts";

/**
 * Deployments: `/v2/deployments…` (control plane), `PUT /deployments-uploads/{token}` (signed
 * tarball uploads) and `/deployments/{id}/…` (each deployment's stable URL). One engine per
 * platform instance: call this once per `startPlatform` (tests start several in one process).
 */
export function createDeploymentsFeature(options: DeploymentsOptions = {}): Feature {
  let engine: RolloutEngine | null = null;
  let housekeeping: Housekeeping | null = null;
  const ensure = (ctx: PlatformContext) => (engine ??= new RolloutEngine(ctx, options));
  const get = () => {
    if (!engine) throw new Error("deployments feature used before it was mounted");
    return engine;
  };
  return {
    name: "deployments",
    // The stable URL's proxy enforces the body limit itself while streaming: the app-wide limit would
    // make the HTTP adapter build a whole Fetch Request and body stream for every proxied call.
    streamedBodies: [/^\/deployments-uploads\/[^/]+$/, /^\/deployments\/[^/]+(\/|$)/],
    routes(router, ctx) {
      ensure(ctx);
      registerDeploymentRoutes(router, ctx, get);
    },
    v1Routes(router, ctx) {
      registerProjectLogRoutes(router, ctx);
    },
    rootRoutes(app, ctx) {
      ensure(ctx);
      app.put("/deployments-uploads/:token", async (c) => {
        const claim = verifyUploadToken(ctx.box, c.req.param("token"));
        if (!claim) return c.json({ detail: "Upload URL is invalid or expired; request a new one" }, 403);
        if (!c.req.raw.body) return c.json({ detail: "Empty upload" }, 400);
        try {
          const bytes = await storeUpload(
            get().layout,
            claim,
            c.req.raw.body,
            ctx.config.uploadLimitBytes,
            uploadLimits(ctx),
          );
          return c.json({ object_path: claim.o, size: bytes }, 200);
        } catch (err) {
          if (err instanceof UploadTooLarge) return c.json({ detail: `Upload too large: ${err.message}` }, 413);
          if (err instanceof UploadQuotaExceeded)
            return c.json({ detail: `Upload quota exceeded: ${err.message}` }, 429);
          throw err;
        }
      });
      mountDeploymentProxy(app, get, ctx.authenticate, ctx.config.settings.WHARF_TENANT_DOMAIN, ctx.log);
    },
    workloadOwner: () => revisionOwner(get),
    async start(ctx) {
      await ensure(ctx).start();
      housekeeping = new Housekeeping(ctx, get().layout);
      housekeeping.start();
    },
    async stop() {
      housekeeping?.stop();
      await engine?.stop();
    },
  };
}
