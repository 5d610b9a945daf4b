import { z } from "zod";
import { SettingsError } from "./errors.ts";

/**
 * Every setting Wharf reads, declared once: its variable, type, default, meaning and the part that
 * uses it. `loadSettings` validates them all at start (a bad value stops start-up naming the
 * variable); `wharf up --help` and the README's configuration table are generated from this list
 * (`test/config/settings.test.ts` checks they agree). To add a setting, add one entry below and run
 * `node bin/run-ts.js scripts/settings-table.ts --write` to refresh the README.
 */

export type SettingPart =
  | "control plane"
  | "storage"
  | "encryption"
  | "logging"
  | "connections"
  | "egress"
  | "sandboxes"
  | "deployments"
  | "agent server"
  | "CLI and graph clients"
  | "install";

export interface SettingDeclaration<S extends z.ZodTypeAny = z.ZodTypeAny> {
  part: SettingPart;
  /** Shown in the help and the table. */
  type: string;
  /** The value used when the variable is unset or empty, as the operator would write it. */
  default?: string;
  /** How the default reads when it is not a literal value (for example "`$WHARF_HOME/…`"). */
  defaultText?: string;
  description: string;
  /** Parses the raw string (or undefined when unset without a default). */
  schema: S;
}

const int = (min: number, max: number = Number.MAX_SAFE_INTEGER) => z.coerce.number().int().min(min).max(max);
const flag = () => z.enum(["0", "1", "true", "false"]).transform((v) => v === "1" || v === "true");
const text = () => z.string().min(1);
const list = () =>
  z.string().transform((v) =>
    v
      .split(",")
      .map((s) => s.trim())
      .filter(Boolean),
  );
const decl = <S extends z.ZodTypeAny>(d: SettingDeclaration<S>) => d;

export const SETTINGS = {
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

  WHARF_OAUTH_STATE_TTL_SECONDS: decl({
    part: "connections",
    type: "seconds",
    default: "600",
    description: "lifetime of a started connect flow",
    schema: int(30, 3600),
  }),
  WHARF_OAUTH_REFRESH_SKEW_SECONDS: decl({
    part: "connections",
    type: "seconds",
    default: "120",
    description: "tokens this close to expiry are refreshed before they are handed out",
    schema: int(0, 3600),
  }),
  WHARF_OAUTH_SWEEP_INTERVAL_SECONDS: decl({
    part: "connections",
    type: "seconds",
    default: "60",
    description: "period of the background refresh sweep (0 disables it)",
    schema: int(0, 86_400),
  }),
  WHARF_OAUTH_SWEEP_WINDOW_SECONDS: decl({
    part: "connections",
    type: "seconds",
    default: "600",
    description: "the sweep refreshes tokens expiring within this window",
    schema: int(0, 86_400),
  }),
  WHARF_OAUTH_REFRESH_LEASE_SECONDS: decl({
    part: "connections",
    type: "seconds",
    default: "30",
    description: "longest one process holds a token's refresh lease",
    schema: int(2, 600),
  }),
  WHARF_OAUTH_PROVIDER_TIMEOUT_SECONDS: decl({
    part: "connections",
    type: "seconds",
    default: "10",
    description: "timeout of each call to an OAuth provider",
    schema: int(1, 120),
  }),

  WHARF_EGRESS_HOSTS: decl({
    part: "egress",
    type: "list",
    default: "",
    description: "static resolution for the egress proxy: comma-separated `name=address` or `name:port=address:port`",
    schema: z.string(),
  }),
  WHARF_EGRESS_ALLOW_INTERNAL: decl({
    part: "egress",
    type: "CIDR list",
    default: "",
    description: "comma-separated CIDRs of internal addresses sandboxes may reach (never through proxy_config)",
    schema: list(),
  }),
  WHARF_EGRESS_UPSTREAM_CA_FILE: decl({
    part: "egress",
    type: "path",
    defaultText: "none",
    description:
      "PEM file of extra roots trusted for upstream TLS, on top of Node's bundled roots and the host's CA store",
    schema: text().optional(),
  }),
  WHARF_EGRESS_SYSTEM_CA_FILE: decl({
    part: "egress",
    type: "path",
    default: "auto",
    description:
      "the host's CA bundle trusted for upstream TLS: `auto` (`SSL_CERT_FILE` if set, else the first of `/etc/ssl/certs/ca-certificates.crt`, `/etc/pki/tls/certs/ca-bundle.crt`, `/etc/ssl/ca-bundle.pem`, `/etc/ssl/cert.pem`), a path, or `none`",
    schema: text(),
  }),
  WHARF_EGRESS_SYSTEM_DNS: decl({
    part: "egress",
    type: "0/1",
    default: "1",
    description: "1 resolves names with the system resolver; 0 resolves only `WHARF_EGRESS_HOSTS`",
    schema: flag(),
  }),
  WHARF_EGRESS_HEADER_TIMEOUT_MS: decl({
    part: "egress",
    type: "ms",
    default: "10000",
    description: "time a sandbox connection has to send its request head or TLS ClientHello",
    schema: int(100),
  }),
  WHARF_EGRESS_IDLE_TIMEOUT_MS: decl({
    part: "egress",
    type: "ms",
    default: "120000",
    description: "idle sandbox connections are closed after this",
    schema: int(100),
  }),
  WHARF_EGRESS_MAX_CONNECTIONS: decl({
    part: "egress",
    type: "integer",
    default: "512",
    description: "concurrent client connections per sandbox",
    schema: int(1),
  }),
  WHARF_EGRESS_ISOLATE: decl({
    part: "egress",
    type: "0/1",
    default: "1",
    description: "1 runs the egress data plane in its own supervised process; 0 in the platform process",
    schema: flag(),
  }),
  WHARF_EGRESS_FAULT_HOOK: decl({
    part: "egress",
    type: "0/1",
    default: "0",
    description: "1 lets a request with `x-wharf-egress-fault: crash` crash the data plane (fault tests only)",
    schema: flag(),
  }),
  WHARF_EGRESS_PROXY_PORT: decl({
    part: "egress",
    type: "port",
    default: "3128",
    description: "port of the explicit proxy on 127.0.0.1 inside each sandbox",
    schema: int(1, 65535),
  }),

  WHARF_SANDBOX_DRIVER: decl({
    part: "sandboxes",
    type: "enum",
    default: "local",
    description: "`local` (Linux namespaces) or `none` (sandbox calls answer 503)",
    schema: z.enum(["local", "none"]),
  }),
  WHARF_SANDBOX_DISK: decl({
    part: "sandboxes",
    type: "enum",
    default: "image",
    description:
      "`image`: an ext4 image per sandbox with a hard `fs_capacity_bytes`; `dir`: a directory (per-file limit only)",
    schema: z.enum(["dir", "image"]),
  }),
  WHARF_SANDBOX_BASE_CACHE: decl({
    part: "sandboxes",
    type: "path",
    defaultText: "`$WHARF_HOME/sandboxes/images`",
    description: "cache of the base image assembled from host packages",
    schema: text().optional(),
  }),
  WHARF_SANDBOX_HOST_UID: decl({
    part: "sandboxes",
    type: "uid",
    default: "200000",
    description: "unprivileged host uid sandbox processes run as",
    schema: int(1000, 2 ** 31 - 2),
  }),
  WHARF_SANDBOX_PIDS_MAX: decl({
    part: "sandboxes",
    type: "integer",
    default: "1024",
    description: "process limit per sandbox",
    schema: int(16),
  }),
  WHARF_SANDBOX_TTL_SECOND_MS: decl({
    part: "sandboxes",
    type: "ms",
    default: "1000",
    description: "length of one second of sandbox TTLs (tests shorten it)",
    schema: int(1),
  }),
  WHARF_SANDBOX_TICK_MS: decl({
    part: "sandboxes",
    type: "ms",
    default: "5000",
    description: "period of the lifecycle loop (idle stop, deadlines, deletion)",
    schema: int(10),
  }),
  WHARF_SANDBOX_PROVISION_DEADLINE_MS: decl({
    part: "sandboxes",
    type: "ms",
    default: "120000",
    description: "a sandbox still provisioning after this fails",
    schema: int(100),
  }),
  WHARF_SANDBOX_KEEP_RUNNING: decl({
    part: "sandboxes",
    type: "0/1",
    default: "0",
    description: "keep sandboxes running across a graceful restart (live restore)",
    schema: flag(),
  }),
  WHARF_SANDBOX_WARM_POOL: decl({
    part: "sandboxes",
    type: "integer",
    default: "2",
    description: "sandboxes kept half-started so a create with default resources takes one at once (0 = off)",
    schema: int(0, 64),
  }),
  WHARF_SANDBOX_DOWNLOAD_LINK_TTL_SECONDS: decl({
    part: "sandboxes",
    type: "seconds",
    default: "3600",
    description:
      "lifetime of a download link whose request names no `expires_in_seconds` (0: such links never expire, as on LangSmith)",
    schema: int(0, 10 * 365 * 24 * 3600),
  }),
  WHARF_SANDBOX_MAX_OUTPUT_BYTES: decl({
    part: "sandboxes",
    type: "bytes",
    default: String(64 << 20),
    description: "output kept per command stream for re-attaching clients",
    schema: int(1024),
  }),
  WHARF_SANDBOX_MEMORY_OVERCOMMIT: decl({
    part: "sandboxes",
    type: "factor",
    default: "2",
    description:
      "running sandboxes' mem_bytes may add up to this many times the host's memory (503 beyond); one sandbox never more than the memory itself (422)",
    schema: z.coerce.number().min(0.01).max(100),
  }),
  WHARF_SANDBOX_DISK_OVERCOMMIT: decl({
    part: "sandboxes",
    type: "factor",
    default: "1",
    description:
      "what sandbox disks may still grow by, in all, may be this many times the free space of `$WHARF_HOME/sandboxes` (422 for one disk beyond it, 503 for the sum)",
    schema: z.coerce.number().min(0.01).max(100),
  }),
  WHARF_SANDBOX_WORKSPACE_MAX_SANDBOXES: decl({
    part: "sandboxes",
    type: "integer",
    default: "100",
    description: "sandboxes one workspace may have, whatever their state (429 beyond)",
    schema: int(1),
  }),
  WHARF_SANDBOX_WORKSPACE_MAX_MEM_BYTES: decl({
    part: "sandboxes",
    type: "bytes",
    default: String(64 * 1024 ** 3),
    description: "mem_bytes one workspace's running sandboxes may hold in all (429 beyond)",
    schema: int(64 << 20),
  }),
  WHARF_SANDBOX_WORKSPACE_MAX_DISK_BYTES: decl({
    part: "sandboxes",
    type: "bytes",
    default: String(512 * 1024 ** 3),
    description: "fs_capacity_bytes one workspace's sandboxes may have in all (429 beyond)",
    schema: int(64 << 20),
  }),

  WHARF_DEPLOYMENT_ISOLATION: decl({
    part: "deployments",
    type: "enum",
    defaultText: "on where the host can (root with bubblewrap)",
    description: "`off` runs deployed code unconfined, as the platform's user",
    schema: z.enum(["on", "off"]).optional(),
  }),
  WHARF_DEPLOYMENT_DB_STATEMENT_TIMEOUT_SECONDS: decl({
    part: "deployments",
    type: "seconds",
    default: "300",
    description:
      "on PostgreSQL, longest statement of a deployment's role and longest it may sit idle inside a transaction: its `statement_timeout` and `idle_in_transaction_session_timeout`, and a platform sweep cancels longer statements and ends such sessions (the role could lift its own)",
    schema: int(1, 86_400),
  }),
  WHARF_DEPLOYMENT_DB_TEMP_FILE_LIMIT_BYTES: decl({
    part: "deployments",
    type: "bytes",
    default: String(1024 ** 3),
    description: "on PostgreSQL, temporary file space one session of a deployment's role may use (`temp_file_limit`)",
    schema: int(1024),
  }),
  WHARF_DEPLOYMENT_STATE_BYTES: decl({
    part: "deployments",
    type: "bytes",
    default: String(10 * 1024 ** 3),
    description:
      "size of a confined deployment's state folder `/state` (a sparse ext4 image; a full one is ENOSPC inside); an existing image keeps its size",
    schema: int(16 * 1024 * 1024),
  }),
  WHARF_DEPLOYMENT_WORKSPACE_MAX: decl({
    part: "deployments",
    type: "integer",
    default: "50",
    description: "deployments one workspace may have (429 beyond)",
    schema: int(1),
  }),
  WHARF_DEPLOYMENT_UPLOADS_MAX: decl({
    part: "deployments",
    type: "integer",
    default: "100",
    description: "uploaded source tarballs one workspace may keep (429 beyond)",
    schema: int(1),
  }),
  WHARF_DEPLOYMENT_UPLOADS_MAX_BYTES: decl({
    part: "deployments",
    type: "bytes",
    default: String(10 * 1024 ** 3),
    description: "bytes of uploaded source tarballs one workspace may keep in all (429 beyond)",
    schema: int(1024),
  }),
  WHARF_DEPLOYMENT_UPLOAD_TTL_SECONDS: decl({
    part: "deployments",
    type: "seconds",
    default: "86400",
    description: "an uploaded tarball no deployment or unfinished revision uses is removed once this old",
    schema: int(1),
  }),
  WHARF_DEPLOY_LOCAL_ROOTS: decl({
    part: "deployments",
    type: "path list",
    default: "",
    description:
      "comma-separated folders whose subfolders deployments may build from with `local_path` (`wharf deploy --local`); empty refuses `local_path`",
    schema: list().refine((dirs) => dirs.every((d) => d.startsWith("/")), {
      message: "every folder must be an absolute path",
    }),
  }),
  WHARF_BUILD_REGISTRIES_INTERNAL: decl({
    part: "deployments",
    type: "0/1",
    default: "0",
    description:
      "1 lets build steps reach the host's own package registries (npm's `registry`, pip's `index-url`/`extra-index-url`, as `npm config get` and `pip config list` report them) at internal addresses: the one setting for a company mirror. Only those hosts, only builds",
    schema: flag(),
  }),
  WHARF_EXAMPLE_PROJECT: decl({
    part: "deployments",
    type: "path",
    defaultText: "`examples/chat-agent`",
    description: "the project `wharf up` deploys as the deployment `example`, or `off`",
    schema: text().optional(),
  }),

  WHARF_AGENT_EGRESS_PROXIED: decl({
    part: "agent server",
    type: "0/1",
    default: "0",
    description:
      "set by the platform for a confined deployment's agent server, whose every connection goes through the egress proxy: runs' webhooks are left to the proxy's address policy instead of being checked in the server (elsewhere they are checked against `WHARF_EGRESS_ALLOW_INTERNAL`)",
    schema: flag(),
  }),
  WHARF_CRON_TICK_MS: decl({
    part: "agent server",
    type: "ms",
    default: "5000",
    description: "how often an agent server looks for due crons",
    schema: int(10, 3_600_000),
  }),
  WHARF_AGENT_PROJECT: decl({
    part: "agent server",
    type: "path",
    defaultText: "`examples/chat-agent`",
    description: "project the in-process agent server serves (`createAgentServerFeature`), or `off`",
    schema: text().optional(),
  }),
  WHARF_AGENT_PORT: decl({
    part: "agent server",
    type: "port",
    default: "8124",
    description: "port of the in-process agent server (0: any free port)",
    schema: int(0, 65535),
  }),
  WHARF_AGENT_SERVER_ID: decl({
    part: "agent server",
    type: "string",
    defaultText: "`example:<project folder>`",
    description: "server id of the in-process agent server (scopes its threads and runs)",
    schema: text().optional(),
  }),
  WHARF_PYTHON: decl({
    part: "agent server",
    type: "path",
    default: "python3",
    description: "interpreter (3.11 or newer) that creates the virtual environments of Python projects",
    schema: text(),
  }),
  WHARF_PYTHON_ENVS: decl({
    part: "agent server",
    type: "path",
    defaultText: "`$WHARF_HOME/python-envs`",
    description: "folder of the cached virtual environments of Python projects, one per dependency key",
    schema: text().optional(),
  }),
  WHARF_PYTHON_WORKERS: decl({
    part: "agent server",
    type: "integer",
    default: "1",
    description:
      "Python worker processes per served Python project; runs are spread over them (least busy first), so a graph that blocks its event loop delays only the runs of its own worker; each is restarted on its own. Also read from the project's `env`",
    schema: int(1, 64),
  }),
  WHARF_PRINT_AGENT_URL: decl({
    part: "agent server",
    type: "0/1",
    default: "0",
    description: "print the in-process agent server's URL and a sample call even without a terminal",
    schema: flag(),
  }),

  WHARF_URL: decl({
    part: "CLI and graph clients",
    type: "URL",
    defaultText: "`http://$WHARF_HOST:$WHARF_PORT`",
    description: "control plane the `wharf` commands and `getAccessToken` call",
    schema: z.string().url().optional(),
  }),
  WHARF_API_KEY: decl({
    part: "CLI and graph clients",
    type: "secret",
    defaultText: "`$WHARF_HOME/bootstrap-key`",
    description: "API key the `wharf` commands and `getAccessToken` send",
    schema: text().optional(),
  }),
  WHARF_TENANT_ID: decl({
    part: "CLI and graph clients",
    type: "id",
    defaultText: "the key's workspace",
    description: "workspace the `wharf` commands act on (`X-Tenant-Id`)",
    schema: text().optional(),
  }),

  WHARF_SKIP_HOST_SETUP: decl({
    part: "install",
    type: "0/1",
    default: "0",
    description: "1 keeps `npm install` from running `scripts/setup-host.sh` as root",
    schema: flag(),
  }),
} as const;

export type SettingName = keyof typeof SETTINGS;
export type Settings = { [K in SettingName]: z.output<(typeof SETTINGS)[K]["schema"]> };

export { SettingsError };

/** Parses every declared setting from `env`; throws naming every bad variable at once. */
export function loadSettings(env: Record<string, string | undefined>): Settings {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, d] of Object.entries(SETTINGS) as Array<[SettingName, SettingDeclaration]>) {
    const raw = env[name] === "" || env[name] === undefined ? d.default : env[name];
    const parsed = d.schema.safeParse(raw);
    if (parsed.success) out[name] = parsed.data;
    else problems.push(`  ${name}: ${parsed.error.issues.map((i) => i.message).join("; ")}`);
  }
  if (problems.length) throw new SettingsError(`invalid configuration:\n${problems.join("\n")}`);
  return out as Settings;
}

/**
 * One declared setting, for code that runs outside a platform (the CLI, graph code calling
 * `getAccessToken`): the same parsing and default as at start, and the same error naming it.
 */
export function readSetting<K extends SettingName>(
  name: K,
  env: Record<string, string | undefined> = process.env,
): Settings[K] {
  const d: SettingDeclaration = SETTINGS[name];
  const raw = env[name] === "" || env[name] === undefined ? d.default : env[name];
  const parsed = d.schema.safeParse(raw);
  if (!parsed.success)
    throw new SettingsError(`invalid configuration: ${name}: ${parsed.error.issues.map((i) => i.message).join("; ")}`);
  return parsed.data as Settings[K];
}
