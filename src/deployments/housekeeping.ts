import type { PlatformContext } from "../platform/context.ts";
import { sweepUploads, type UploadLimits } from "./api/upload-quota.ts";
import type { DeploymentsLayout } from "./layout.ts";
import { cancelOverdueStatements } from "./runtime/statement-watchdog.ts";

/** The upload bounds from the platform's settings. */
export function uploadLimits(ctx: PlatformContext): UploadLimits {
  const s = ctx.config.settings;
  return {
    maxCount: s.WHARF_DEPLOYMENT_UPLOADS_MAX,
    maxBytes: s.WHARF_DEPLOYMENT_UPLOADS_MAX_BYTES,
    ttlMs: s.WHARF_DEPLOYMENT_UPLOAD_TTL_SECONDS * 1000,
  };
}

/**
 * The deployments feature's periodic sweeps: unused uploads past their TTL (every minute) and, on
 * PostgreSQL, deployment statements past their timeout (twice per timeout, at least every 30 s).
 * A failed sweep is logged and tried again at the next period.
 */
export class Housekeeping {
  private timers: NodeJS.Timeout[] = [];

  constructor(
    private readonly ctx: PlatformContext,
    private readonly layout: DeploymentsLayout,
  ) {}

  start(): void {
    const { ctx } = this;
    const every = (ms: number, what: string, fn: () => Promise<number>) => {
      const t = setInterval(() => {
        fn().then(
          (n) => n > 0 && ctx.log.info({ count: n }, what),
          (err) => ctx.log.warn({ err }, `${what}: sweep failed`),
        );
      }, ms);
      t.unref();
      this.timers.push(t);
    };
    const ttlMs = uploadLimits(ctx).ttlMs;
    every(Math.min(60_000, ttlMs), "expired deployment uploads removed", () =>
      sweepUploads(ctx.db, this.layout, ttlMs),
    );
    if (ctx.store.dialect === "postgres") {
      const limit = ctx.config.settings.WHARF_DEPLOYMENT_DB_STATEMENT_TIMEOUT_SECONDS;
      every(
        Math.min(30_000, Math.max(1000, (limit * 1000) / 2)),
        "deployment statements past their timeout cancelled",
        () => cancelOverdueStatements(ctx.db, limit),
      );
    }
  }

  stop(): void {
    for (const t of this.timers.splice(0)) clearInterval(t);
  }
}
