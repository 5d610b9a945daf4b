import type { Kysely } from "kysely";
import { z } from "zod";
import { notFound } from "../http/errors.ts";
import type { Feature } from "../platform/context.ts";
import { listAudit } from "./audit/audit-log.ts";
import { installCloudAuthorizers } from "./credentials/cloud-authorizer.ts";
import { EgressRuntime, setEgressRuntime } from "./egress-runtime.ts";
import { egressSourceFrom } from "./egress-settings.ts";

/** One egress audit row as the API shows it (sandboxes' and deployments' egress logs). */
export const auditEntrySchema = z.object({
  id: z.string(),
  at: z.string(),
  last_at: z.string(),
  count: z.number().int(),
  kind: z.string(),
  decision: z.string(),
  rule: z.string().nullable(),
  host: z.string(),
  port: z.number().int(),
  method: z.string().nullable(),
  path: z.string().nullable(),
  status: z.number().int().nullable(),
  reason: z.string().nullable(),
});

/**
 * The egress proxy as a platform feature: creates the process's proxy runtime (before any feature
 * starts, so sandboxes re-adopted at start can attach), and serves each sandbox's egress audit log.
 */
export function createEgressFeature(): Feature {
  let runtime: EgressRuntime | null = null;
  return {
    name: "egress",
    routes(router, ctx) {
      if (!runtime) {
        runtime = new EgressRuntime({
          db: ctx.db,
          box: ctx.box,
          log: ctx.log,
          source: egressSourceFrom(ctx.config.settings),
          isolate: ctx.config.settings.WHARF_EGRESS_ISOLATE,
        });
        installCloudAuthorizers(runtime);
      }
      setEgressRuntime(runtime);
      const rt = runtime;
      router.add({
        method: "get",
        path: "/sandboxes/boxes/:name/egress-log",
        summary:
          "The sandbox's egress audit log: injections, signings, callbacks, raw tunnels and blocks (newest first; never a credential value)",
        tags: ["sandboxes"],
        params: z.object({ name: z.string().min(1).max(256) }),
        query: z.object({
          limit: z.coerce.number().int().min(1).max(1000).default(100),
          before: z.string().max(64).optional(),
          kind: z.enum(["inject", "block", "tunnel", "sign", "callback", "credential"]).optional(),
        }),
        responses: {
          200: {
            description: "Audit entries",
            schema: z.object({ entries: z.array(auditEntrySchema), next_before: z.string().nullable() }),
          },
          404: { description: "No such sandbox" },
        },
        handler: async ({ c, principal, params, query }) => {
          // The sandboxes feature owns the table; read it by name or id within the caller's workspace.
          const db = ctx.db as unknown as Kysely<any>;
          const row = await db
            .selectFrom("sandboxes")
            .select(["id"])
            .where("workspace_id", "=", principal.workspaceId)
            .where((eb: any) => eb.or([eb("name", "=", params.name), eb("id", "=", params.name)]))
            .executeTakeFirst();
          if (!row) throw notFound("Sandbox");
          await rt.audit.flush();
          const entries = await listAudit(ctx.db, principal.workspaceId, row.id, {
            limit: query.limit,
            before: query.before,
            kind: query.kind,
          });
          return c.json({
            entries,
            next_before: entries.length === query.limit ? entries[entries.length - 1].id : null,
          });
        },
      });
    },
    async start(ctx) {
      // The control plane, and in replica mode the internal listener replicas forward to: never a sandbox's destination.
      for (const base of [ctx.baseUrl(), ...(ctx.cluster ? [ctx.cluster.internalUrl()] : [])]) {
        const url = new URL(base);
        runtime?.addSelfEndpoint(url.hostname.replace(/^\[|\]$/g, ""), Number(url.port));
      }
    },
    async stop() {
      if (runtime) await runtime.close();
      setEgressRuntime(null);
      runtime = null;
    },
  };
}
