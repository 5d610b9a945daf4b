import path from "node:path";
import type { Kysely } from "kysely";
import type { Database } from "../../store/schema.ts";
import type { LiveRevision } from "./live-revision.ts";
import { hasCustomAuth } from "./project-flags.ts";

/** How long a proxy may use a cached route; a replaced revision serves at least this long. */
export const ROUTE_TTL_MS = 1000;

/** Who may call a deployment: its workspace's credentials, unless the project has its own auth. */
export interface RouteAccess {
  workspaceId: string;
  customAuth: boolean;
}

export type Route =
  | ({ kind: "live"; live: LiveRevision } & RouteAccess)
  /** `owner`: the replica that serves it (replica mode forwards there; otherwise `url` is dialled). */
  | ({ kind: "remote"; url: string; owner: string } & RouteAccess)
  /** `access` is known when the deployment exists: its workspace is checked before "not serving" is told. */
  | { kind: "none"; status: number; detail: string; access?: RouteAccess };

interface CachedRoute {
  revisionId: string | null;
  url: string | null;
  owner: string | null;
  at: number;
  exists: boolean;
  workspaceId: string;
  customAuth: boolean;
}

/**
 * Where each deployment's stable URL goes: the live revision of this process, another process's
 * server, or a refusal. Read from the database at most once per ROUTE_TTL_MS per deployment.
 */
export class RouteCache {
  private readonly routes = new Map<string, CachedRoute>();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly nodeId: string,
    /** The engine's live revisions (read, never changed here). */
    private readonly live: ReadonlyMap<string, LiveRevision>,
  ) {}

  /** Where the stable URL of a deployment goes right now. */
  async route(deploymentId: string, fresh = false): Promise<Route> {
    let cached = this.routes.get(deploymentId);
    if (fresh || !cached || Date.now() - cached.at > ROUTE_TTL_MS) {
      const row = await this.db
        .selectFrom("deployments")
        .leftJoin("deployment_revisions", "deployment_revisions.id", "deployments.active_revision_id")
        .select([
          "deployments.workspace_id",
          "deployments.active_revision_id",
          "deployment_revisions.serving_url",
          "deployment_revisions.owner",
          "deployment_revisions.project_dir",
          "deployment_revisions.source_revision_config",
        ])
        .where("deployments.id", "=", deploymentId)
        .executeTakeFirst();
      const configPath = row?.source_revision_config
        ? (JSON.parse(row.source_revision_config).langgraph_config_path as string)
        : null;
      cached = {
        revisionId: row?.active_revision_id ?? null,
        url: row?.serving_url ?? null,
        owner: row?.owner ?? null,
        at: Date.now(),
        exists: !!row,
        workspaceId: row?.workspace_id ?? "",
        customAuth: !!(
          row?.project_dir &&
          configPath &&
          hasCustomAuth(path.join(row.project_dir, path.basename(configPath)))
        ),
      };
      this.routes.set(deploymentId, cached);
    }
    if (!cached.exists) return { kind: "none", status: 404, detail: `Deployment ID ${deploymentId} not found.` };
    const access = { workspaceId: cached.workspaceId, customAuth: cached.customAuth };
    if (!cached.revisionId)
      return { kind: "none", status: 503, detail: "The deployment has no deployed revision yet", access };
    const live = this.live.get(cached.revisionId);
    if (live) {
      if (!live.isReady) {
        const ok = await Promise.race([
          live.ready.then(
            () => true,
            () => false,
          ),
          new Promise<boolean>((r) => setTimeout(() => r(false), 30_000).unref()),
        ]);
        if (!ok)
          return {
            kind: "none",
            status: 503,
            detail: "The deployment's agent server is starting; try again shortly",
            access,
          };
      }
      return { kind: "live", live, ...access };
    }
    if (cached.url && cached.owner !== this.nodeId)
      return { kind: "remote", url: cached.url, owner: cached.owner ?? "", ...access };
    return {
      kind: "none",
      status: 503,
      detail: "The deployment's agent server is starting; try again shortly",
      access,
    };
  }

  /** Forgets the cached route (after a change made by this process). */
  invalidate(deploymentId: string): void {
    this.routes.delete(deploymentId);
  }
}
