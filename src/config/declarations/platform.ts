import { z } from "zod";
import { decl, int, text } from "./declare.ts";

/** The settings of the control plane's listener and HTTP limits, storage, run slots, encryption and logging. */
export const PLATFORM_SETTINGS = {
  WHARF_HOST: decl({
    part: "control plane",
    type: "address",
    default: "127.0.0.1",
    description: "address the control plane listens on",
    schema: text(),
  }),
  WHARF_PORT: decl({
    part: "control plane",
    type: "port",
    default: "8123",
    description: "port of the control plane (0: any free port)",
    schema: int(0, 65535),
  }),
  WHARF_PUBLIC_URL: decl({
    part: "control plane",
    type: "URL",
    defaultText: "the listening address",
    description: "URL browsers and sandboxes reach the control plane at (OAuth redirect URIs, data-plane URLs)",
    schema: z
      .string()
      .url()
      .transform((v) => v.replace(/\/+$/, ""))
      .optional(),
  }),
  WHARF_TENANT_DOMAIN: decl({
    part: "control plane",
    type: "domain",
    default: "localhost",
    description:
      "base domain of tenant content's own origins, `<label>.<domain>` on the control plane's port (sandbox services, download links, deployments): never the console's origin; with `localhost` only `browser_url` uses it (other clients may not resolve `*.localhost`)",
    schema: z
      .string()
      .transform((v) => v.toLowerCase().replace(/^\.+|\.+$/g, ""))
      .pipe(
        z
          .string()
          .regex(
            /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/,
            "a domain name such as tenant.example.net",
          ),
      ),
  }),
  WHARF_BODY_LIMIT_BYTES: decl({
    part: "control plane",
    type: "bytes",
    default: String(10 * 1024 * 1024),
    description: "largest JSON request body accepted (413 beyond)",
    schema: int(1024),
  }),
  WHARF_UPLOAD_LIMIT_BYTES: decl({
    part: "control plane",
    type: "bytes",
    default: String(1024 * 1024 * 1024),
    description:
      "largest deployment tarball upload, streamed to disk (sandbox file uploads are bounded by the sandbox's fs_capacity_bytes)",
    schema: int(1024),
  }),
  WHARF_HEADERS_TIMEOUT_MS: decl({
    part: "control plane",
    type: "ms",
    default: "10000",
    description: "time a client connection has to send a complete request head (then 408 and closed)",
    schema: int(500, 600_000),
  }),
  WHARF_REQUEST_TIMEOUT_MS: decl({
    part: "control plane",
    type: "ms",
    default: "300000",
    description:
      "time a client has to send a whole request, body included (0: no limit; uploads of large tarballs need it long)",
    schema: int(0),
  }),
  WHARF_KEEP_ALIVE_TIMEOUT_MS: decl({
    part: "control plane",
    type: "ms",
    default: "65000",
    description:
      "an idle kept-alive client connection is closed after this; longer than common clients keep one for reuse (httpx 5 s, undici 4 s), so the server never closes a connection a client is sending its next request on",
    schema: int(100, 600_000),
  }),
  WHARF_MAX_CONNECTIONS: decl({
    part: "control plane",
    type: "integer",
    default: "4096",
    description:
      "open client connections in total; past it a new one replaces the oldest that has not sent a request head yet, else it is closed (0: no cap)",
    schema: int(0),
  }),
  WHARF_MAX_CONNECTIONS_PER_CLIENT: decl({
    part: "control plane",
    type: "integer",
    default: "256",
    description:
      "open connections per client address, an IPv6 /64 counting as one, loopback excepted (0: no cap; raise it behind a reverse proxy on another host, whose address every client then shares)",
    schema: int(0),
  }),
  WHARF_METRICS_TOKEN: decl({
    part: "control plane",
    type: "secret",
    defaultText: "none (`/metrics` off)",
    description: "operator token that reads `GET /metrics` (Prometheus text) as `Authorization: Bearer <token>`",
    schema: z.string().min(16, "at least 16 characters").optional(),
  }),
  WHARF_INTERNAL_LISTEN: decl({
    part: "control plane",
    type: "host:port",
    defaultText: "none (one process)",
    description:
      "turns on replica mode (PostgreSQL only): the address this replica's internal listener binds, on which other replicas forward the sandbox data-plane and deployment requests whose workload this replica runs (every request signed with a key derived from the master key; put it on a network only replicas reach)",
    schema: z
      .string()
      .regex(/^(\[[0-9a-fA-F:.]+\]|[^\s:/]+):\d{1,5}$/, "host:port, such as 10.0.0.5:8125")
      .optional(),
  }),
  WHARF_REPLICA_URL: decl({
    part: "control plane",
    type: "URL",
    defaultText: "`http://$WHARF_INTERNAL_LISTEN`",
    description:
      "the URL other replicas reach this replica's internal listener at (when it listens on 0.0.0.0 or behind NAT)",
    schema: z
      .string()
      .url()
      .transform((v) => v.replace(/\/+$/, ""))
      .optional(),
  }),
  WHARF_REPLICA_LEASE_MS: decl({
    part: "control plane",
    type: "ms",
    default: "10000",
    description:
      "a replica renews its row in `replicas` every third of this on the database's clock; one that stops renewing is taken as dead: its running sandboxes become `error`",
    schema: int(1000, 600_000),
  }),
  WHARF_BEARER_TTL_SECONDS: decl({
    part: "control plane",
    type: "seconds",
    default: "3600",
    description: "lifetime of bearer tokens from POST /v2/tokens",
    schema: int(60, 30 * 24 * 3600),
  }),

  WHARF_HOME: decl({
    part: "storage",
    type: "path",
    default: ".wharf",
    description: "state folder: SQLite file, master key, bootstrap key, sandboxes, builds",
    schema: text(),
  }),
  DATABASE_URL: decl({
    part: "storage",
    type: "URL",
    defaultText: "SQLite in `$WHARF_HOME/wharf.db`",
    description:
      "`postgres://…` to use PostgreSQL (`?options=-c%20search_path%3Dname` selects a schema); `sqlite:/path/file.db` for another SQLite file",
    schema: z
      .string()
      .refine((v) => /^postgres(ql)?:\/\//.test(v) || v.startsWith("sqlite:"), {
        message: "must start with postgres://, postgresql:// or sqlite:",
      })
      .optional(),
  }),

  REDIS_URL: decl({
    part: "storage",
    type: "URL",
    defaultText: "none (one process: run events stay in its memory)",
    description:
      "`redis://…` (or `rediss://`): run events go through Redis Streams so any replica serves any run's stream; with PostgreSQL (`DATABASE_URL`) only, as one of several identical replicas behind a load balancer (same master key). Redis holds only stream history that may be lost",
    schema: z
      .string()
      .refine((v) => /^rediss?:\/\//.test(v), { message: "must start with redis:// or rediss://" })
      .optional(),
  }),
  WHARF_RUN_SLOTS: decl({
    part: "agent server",
    type: "integer",
    default: "10",
    description:
      "runs an agent server executes at once; more wait `pending` for a free slot on any replica (0: this replica only serves the API and streams)",
    schema: int(0, 10_000),
  }),
  WHARF_RUN_LEASE_MS: decl({
    part: "agent server",
    type: "ms",
    default: "10000",
    description:
      "how long a run's claim holds without its replica renewing it (renewed every third of it, on the database's clock); then another replica resumes the run from its checkpoint",
    schema: int(500, 600_000),
  }),

  WHARF_MASTER_KEY: decl({
    part: "encryption",
    type: "keys",
    defaultText: "generated into `$WHARF_HOME/master.key` (0600)",
    description: "base64 or hex 32-byte keys, comma-separated, the first one active, that seal secrets at rest",
    schema: text().optional(),
  }),

  WHARF_LOG_LEVEL: decl({
    part: "logging",
    type: "level",
    default: "info",
    description: "`trace`, `debug`, `info`, `warn`, `error`, `fatal` or `silent`",
    schema: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]),
  }),
} as const;
