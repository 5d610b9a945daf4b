import type http from "node:http";
import type { Hono } from "hono";
import type { Kysely } from "kysely";
import type { ClusterView, WorkloadOwner } from "../cluster/index.ts";
import type { WharfConfig } from "../config/index.ts";
import type { SecretBox } from "../crypto/secret-box.ts";
import type { Authenticate } from "../http/authenticate.ts";
import type { AppEnv } from "../http/principal.ts";
import type { Router } from "../http/route.ts";
import type { Logger } from "../log/logger.ts";
import type { Store } from "../store/database.ts";
import type { Database } from "../store/schema.ts";

/** What every feature gets from the platform: configuration, storage, encryption, logging, auth. */
export interface PlatformContext {
  config: WharfConfig;
  store: Store;
  db: Kysely<Database>;
  box: SecretBox;
  log: Logger;
  authenticate: Authenticate;
  /** The base URL the control plane is reachable at, once it listens (e.g. http://127.0.0.1:8123). */
  baseUrl(): string;
  /** Replica mode (`WHARF_INTERNAL_LISTEN`, PostgreSQL): this replica and the others' liveness; null in one process. */
  cluster: ClusterView | null;
}

/**
 * A part of the platform (secrets, sandboxes, deployments, …). `routes` adds `/v2` endpoints (also
 * served under `/api/v2`); `v1Routes` the few `/v1` paths real clients still call (everything else
 * under `/v1` stays reserved); `rootRoutes` adds endpoints outside `/v2` (data planes, deployment URLs);
 * `start` runs after the server listens (background loops, reconciliation); `stop` on shutdown.
 */
export interface Feature {
  name: string;
  routes?(router: Router, ctx: PlatformContext): void;
  v1Routes?(router: Router, ctx: PlatformContext): void;
  rootRoutes?(app: Hono<AppEnv>, ctx: PlatformContext): void;
  /**
   * Request paths whose handlers stream the body to disk or into a sandbox and enforce their own
   * limit (file and tarball uploads): exempt from the JSON body limit (`WHARF_BODY_LIMIT_BYTES`).
   */
  streamedBodies?: RegExp[];
  start?(ctx: PlatformContext): Promise<void>;
  stop?(): Promise<void>;
  /**
   * Replica mode: which replica runs the workload a request target names (a sandbox's data plane,
   * a deployment's revision); the platform forwards the request there when it is another live one.
   */
  workloadOwner?(ctx: PlatformContext): WorkloadOwner;
  /**
   * Called with the Node HTTP server right after it listens (WebSocket upgrades); in replica mode
   * also with the internal listener, which serves the requests other replicas forward.
   */
  onServer?(server: http.Server, ctx: PlatformContext): void;
}
