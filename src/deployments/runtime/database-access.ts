import crypto from "node:crypto";
import type net from "node:net";
import { sql, type Kysely } from "kysely";
import type { PlatformContext } from "../../platform/context.ts";
import type { Database } from "../../store/schema.ts";
import type { CapturedNetwork } from "../../confinement/index.ts";
import { DatabaseForwarder, type Upstream } from "./database-forwarder.ts";

/**
 * A deployment's own PostgreSQL storage: when the platform runs on PostgreSQL, the deployment's
 * agent server keeps its threads, runs, checkpoints and store in its own schema, reached by its
 * own login role that owns that schema and has no privilege on anything else. The role's password
 * is random, sealed in the deployments row; deleting the deployment drops the schema and the role.
 * On SQLite nothing here applies: the agent server keeps a SQLite file in its state folder.
 */

declare module "../store/deployments-tables.ts" {
  interface DeploymentsTable {
    /** The deployment role's PostgreSQL password, sealed (`deployment-db-password:<workspace>:<id>`). */
    db_password_key_id: string | null;
    db_password_ciphertext: string | null;
  }
}

export const dbPasswordAad = (workspaceId: string, deploymentId: string) =>
  `deployment-db-password:${workspaceId}:${deploymentId}`;

/** The port the agent server reaches PostgreSQL on, inside its network namespace. */
export const DATABASE_PORT = 5432;
/** Sessions one deployment may hold (store pool, checkpointer pool, cancel signals, a restart's overlap). */
export const CONNECTION_LIMIT = 48;

export interface DeploymentDatabaseNames {
  role: string;
  schema: string;
}

/**
 * Role and schema of a deployment: `wharf_dep_<hash of its id>`. Every role of a PostgreSQL server
 * is listed to every other (`pg_roles` is readable by PUBLIC and cannot be filtered per role), so
 * the names carry no deployment id: another deployment sees that roles exist, not whose they are.
 * 32 hex digits, well under PostgreSQL's 63-byte names, never in need of escaping.
 */
export function deploymentDatabaseNames(deploymentId: string): DeploymentDatabaseNames {
  const name = `wharf_dep_${crypto.createHash("sha256").update(`wharf-deployment-database:${deploymentId}`).digest("hex").slice(0, 32)}`;
  return { role: name, schema: name };
}

/** The names before they were hashed (`wharf_dep_<id without dashes>`): renamed on the next start. */
export function legacyDatabaseNames(deploymentId: string): DeploymentDatabaseNames | null {
  const compact = deploymentId.replace(/-/g, "").toLowerCase();
  if (!/^[0-9a-f]{32}$/.test(compact)) return null;
  return { role: `wharf_dep_${compact}`, schema: `wharf_dep_${compact}` };
}

const ident = (name: string) => {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`not a safe PostgreSQL name: ${name}`);
  return `"${name}"`;
};
const literal = (value: string) => `'${value.replace(/'/g, "''")}'`;

export interface ProvisionInput extends DeploymentDatabaseNames {
  password: string;
  /** Names an earlier version gave the role and schema, to rename. */
  legacy?: DeploymentDatabaseNames | null;
  /** Per-role defaults: `statement_timeout` and `idle_in_transaction_session_timeout` (a platform sweep enforces both too) and `temp_file_limit`. */
  limits: DatabaseLimits;
  /** The platform's database (the deployment gets CONNECT on it, in case PUBLIC lost it). */
  database: string;
  /** The schema of the platform's own tables. */
  platformSchema: string;
  /**
   * A platform role that is not a superuser needs CREATEROLE, and membership in the deployment's
   * role to create a schema owned by it (and to drop what it owns later).
   */
  platformIsSuperuser: boolean;
}

export interface DatabaseLimits {
  statementTimeoutSeconds: number;
  tempFileLimitBytes: number;
}

/** One statement of a plan, and the SQLSTATEs that mean another process already did it. */
export interface PlanStep {
  sql: string;
  alreadyDone?: string[];
  /** SQLSTATEs that leave this step undone with a warning (a privilege the platform's role lacks). */
  unavailable?: string[];
}

/**
 * What makes a deployment's storage, in order, each step idempotent (several platform processes may
 * run it at once). The role: a login with nothing else (no superuser, createdb, createrole,
 * replication, RLS bypass, inherited privileges), a connection cap, its schema as search path. The
 * schema: owned by the role (so it can migrate), nothing for PUBLIC. Around it, what PUBLIC gets by
 * default that matters: CREATE on the platform's schema (and on `public`, the default before
 * PostgreSQL 15) would let any role plant tables or functions where the platform resolves names.
 */
export function provisionPlan(p: ProvisionInput): PlanStep[] {
  const role = ident(p.role);
  const schema = ident(p.schema);
  const attributes = `LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS CONNECTION LIMIT ${CONNECTION_LIMIT} PASSWORD ${literal(p.password)}`;
  // An id-named role and schema of an earlier version: renamed (42704/3F000: none; 42710/42P06: done).
  const rename: PlanStep[] = p.legacy
    ? [
        { sql: `ALTER ROLE ${ident(p.legacy.role)} RENAME TO ${role}`, alreadyDone: ["42704", "42710"] },
        { sql: `ALTER SCHEMA ${ident(p.legacy.schema)} RENAME TO ${schema}`, alreadyDone: ["3F000", "42P06"] },
      ]
    : [];
  return [
    ...rename,
    // 42710 duplicate_object; 23505 when two sessions insert into pg_authid at the same moment.
    { sql: `CREATE ROLE ${role} ${attributes}`, alreadyDone: ["42710", "23505"] },
    { sql: `ALTER ROLE ${role} WITH ${attributes}` },
    { sql: `ALTER ROLE ${role} SET search_path = ${schema}` },
    // A default the role may lower or lift in its session: the platform's sweep cancels what runs longer.
    { sql: `ALTER ROLE ${role} SET statement_timeout = ${Math.round(p.limits.statementTimeoutSeconds * 1000)}` },
    // A session left idle inside a transaction holds its locks and its snapshot (vacuum cannot
    // clean behind it) for as long as it likes: bounded like a statement (the sweep enforces it too).
    {
      sql: `ALTER ROLE ${role} SET idle_in_transaction_session_timeout = ${Math.round(p.limits.statementTimeoutSeconds * 1000)}`,
    },
    // Only a superuser may change it (in a session too): a hard bound. A platform role that is not a
    // superuser needs `GRANT SET ON PARAMETER temp_file_limit` (PostgreSQL 15+) to set it.
    {
      sql: `ALTER ROLE ${role} SET temp_file_limit = ${Math.max(0, Math.floor(p.limits.tempFileLimitBytes / 1024))}`,
      unavailable: ["42501"],
    },
    ...(p.platformIsSuperuser ? [] : [{ sql: `GRANT ${role} TO CURRENT_USER`, alreadyDone: ["0LP01"] }]),
    { sql: `CREATE SCHEMA IF NOT EXISTS ${schema} AUTHORIZATION ${role}`, alreadyDone: ["42P06", "23505"] },
    { sql: `ALTER SCHEMA ${schema} OWNER TO ${role}` },
    { sql: `REVOKE ALL ON SCHEMA ${schema} FROM PUBLIC` },
    { sql: `GRANT CONNECT ON DATABASE ${ident(p.database)} TO ${role}` },
    { sql: `REVOKE CREATE ON SCHEMA ${ident(p.platformSchema)} FROM PUBLIC` },
    ...(p.platformSchema === "public"
      ? []
      : [{ sql: `REVOKE CREATE ON SCHEMA "public" FROM PUBLIC`, alreadyDone: ["3F000"] }]),
  ];
}

/** What removes a deployment's storage: its sessions, its schema and everything it owns, the role. */
export function dropPlan(names: DeploymentDatabaseNames, legacy: DeploymentDatabaseNames | null = null): PlanStep[] {
  const role = ident(names.role);
  return [
    ...(legacy ? dropPlan(legacy) : []),
    { sql: `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ${literal(names.role)}` },
    { sql: `DROP SCHEMA IF EXISTS ${ident(names.schema)} CASCADE` },
    // Objects it created elsewhere (none can exist, but a grant on the database does) and its grants.
    { sql: `DROP OWNED BY ${role} CASCADE`, alreadyDone: ["42704"] },
    { sql: `DROP ROLE IF EXISTS ${role}` },
  ];
}

/** PostgreSQL's "tuple concurrently updated" on catalog rows two sessions alter at once: try again. */
const RETRYABLE = new Set(["XX000", "40001", "40P01"]);

async function runPlan(
  db: Kysely<Database>,
  plan: PlanStep[],
  warn: (msg: string, err: unknown) => void = () => undefined,
): Promise<void> {
  for (const step of plan) {
    for (let attempt = 0; ; attempt++) {
      try {
        await sql.raw(step.sql).execute(db);
        break;
      } catch (err) {
        const code = (err as { code?: string }).code ?? "";
        if (step.alreadyDone?.includes(code)) break;
        if (step.unavailable?.includes(code)) {
          warn(`"${step.sql}" is not applied`, err);
          break;
        }
        if (RETRYABLE.has(code) && attempt < 5) {
          await new Promise((r) => setTimeout(r, 20 * (attempt + 1)));
          continue;
        }
        throw new Error(
          `preparing the deployment's database failed at "${step.sql.replace(/PASSWORD '[^']*'/, "PASSWORD '***'")}": ${(err as Error).message}`,
          { cause: err },
        );
      }
    }
  }
}

/** The sealed password of the deployment's role, created on first use (the first writer wins). */
async function rolePassword(ctx: PlatformContext, deployment: { id: string; workspace_id: string }): Promise<string> {
  const aad = dbPasswordAad(deployment.workspace_id, deployment.id);
  const read = () =>
    ctx.db
      .selectFrom("deployments")
      .select(["db_password_key_id", "db_password_ciphertext"])
      .where("id", "=", deployment.id)
      .executeTakeFirst();
  let row = await read();
  if (!row) throw new Error("the deployment is gone");
  if (!row.db_password_ciphertext) {
    const sealed = ctx.box.seal(crypto.randomBytes(32).toString("base64url"), aad);
    await ctx.db
      .updateTable("deployments")
      .set({ db_password_key_id: sealed.keyId, db_password_ciphertext: sealed.blob })
      .where("id", "=", deployment.id)
      .where("db_password_ciphertext", "is", null)
      .execute();
    row = await read();
    if (!row?.db_password_ciphertext) throw new Error("the deployment is gone");
  }
  return ctx.box.open({ keyId: row.db_password_key_id!, blob: row.db_password_ciphertext }, aad);
}

export interface DeploymentDatabase extends DeploymentDatabaseNames {
  password: string;
  database: string;
}

/**
 * Deployments whose role and schema this process has already made (or re-asserted) once: later
 * starts of their servers (restarts, new revisions, takeovers) skip the DDL, which takes catalog
 * locks that a busy database makes slow. Dropping a deployment's database forgets it.
 */
const ensured = new Map<string, DeploymentDatabase>();

/** Creates (or re-asserts) the deployment's role and schema; returns how to log in as it. */
export async function ensureDeploymentDatabase(
  ctx: PlatformContext,
  deployment: { id: string; workspace_id: string },
): Promise<DeploymentDatabase> {
  const known = ensured.get(deployment.id);
  if (known) return known;
  const names = deploymentDatabaseNames(deployment.id);
  const password = await rolePassword(ctx, deployment);
  const { rows } = await sql<{
    db: string;
    schema: string;
    su: string;
  }>`select current_database() as db, current_schema() as schema, current_setting('is_superuser') as su`.execute(
    ctx.db,
  );
  const { db: database, schema: platformSchema, su } = rows[0]!;
  const limits = {
    statementTimeoutSeconds: ctx.config.settings.WHARF_DEPLOYMENT_DB_STATEMENT_TIMEOUT_SECONDS,
    tempFileLimitBytes: ctx.config.settings.WHARF_DEPLOYMENT_DB_TEMP_FILE_LIMIT_BYTES,
  };
  const plan = provisionPlan({
    ...names,
    legacy: legacyDatabaseNames(deployment.id),
    password,
    database,
    platformSchema,
    platformIsSuperuser: su === "on",
    limits,
  });
  await runPlan(ctx.db, plan, (msg, err) =>
    ctx.log.warn({ deployment: deployment.id, err }, `deployment database limit: ${msg}`),
  );
  const made = { ...names, password, database };
  ensured.set(deployment.id, made);
  return made;
}

/** Drops the deployment's schema (its threads, runs, checkpoints, store) and its role. No-op on SQLite. */
export async function dropDeploymentDatabase(ctx: PlatformContext, deploymentId: string): Promise<void> {
  if (ctx.store.dialect !== "postgres") return;
  ensured.delete(deploymentId);
  await runPlan(ctx.db, dropPlan(deploymentDatabaseNames(deploymentId), legacyDatabaseNames(deploymentId)));
}

/** Where the platform's own PostgreSQL listens, from its DATABASE_URL (`?host=/dir` is a socket folder). */
export function upstreamOf(databaseUrl: string): Upstream {
  const url = new URL(databaseUrl);
  const port = Number(url.port || 5432);
  const hostParam = url.searchParams.get("host");
  const host = hostParam ?? decodeURIComponent(url.hostname);
  if (!host || host.startsWith("/")) return { path: `${host || "/var/run/postgresql"}/.s.PGSQL.${port}` };
  return { host: host.replace(/^\[|\]$/g, ""), port };
}

/** A connection URL; the password is base64url, the names are safe identifiers: nothing to escape. */
export function roleUrl(d: DeploymentDatabase, where: { host: string; port: number }): string {
  return `postgres://${d.role}:${d.password}@${where.host}:${where.port}/${encodeURIComponent(d.database)}`;
}

/** What a revision's start needs to give its agent server its database (null on SQLite). */
export interface DatabaseAccess {
  /** Environment for the agent server (its connection URL and schema). */
  env: Record<string, string>;
  /** In-namespace TCP ports to capture (confined only). */
  tcpPorts: number[];
  /** Takes the captured listeners (confined only). */
  attach(captured: CapturedNetwork | null): void;
  close(): void;
}

/**
 * Prepares a revision's database: confined, the agent server connects to 127.0.0.1:5432 in its own
 * namespace, a listener the platform forwards to its PostgreSQL for this role only; unconfined
 * (no namespaces: it already runs as the platform's user), straight to the platform's server.
 */
export async function prepareDatabaseAccess(
  ctx: PlatformContext,
  deployment: { id: string; workspace_id: string },
  isolated: boolean,
): Promise<DatabaseAccess | null> {
  const databaseUrl = ctx.config.databaseUrl;
  if (ctx.store.dialect !== "postgres" || !databaseUrl) return null;
  const d = await ensureDeploymentDatabase(ctx, deployment);
  const upstream = upstreamOf(databaseUrl);
  const env = { WHARF_AGENT_DATABASE_SCHEMA: d.schema };
  if (!isolated) {
    const direct =
      "path" in upstream
        ? `${roleUrl(d, { host: "localhost", port: DATABASE_PORT })}?host=${encodeURIComponent(upstream.path.replace(/\/\.s\.PGSQL\.\d+$/, ""))}`
        : roleUrl(d, upstream);
    return {
      env: { ...env, WHARF_AGENT_DATABASE_URL: direct },
      tcpPorts: [],
      attach: () => undefined,
      close: () => undefined,
    }; // a direct URL: no forwarder to attach or close
  }
  const forwarder = new DatabaseForwarder(upstream, { user: d.role, database: d.database }, (reason) =>
    ctx.log.warn({ deployment: deployment.id, reason }, "refused a database connection from a deployment"),
  );
  return {
    env: { ...env, WHARF_AGENT_DATABASE_URL: roleUrl(d, { host: "127.0.0.1", port: DATABASE_PORT }) },
    tcpPorts: [DATABASE_PORT],
    attach: (captured) => {
      const listener: net.Server | undefined = captured?.tcp.get(DATABASE_PORT);
      if (!listener)
        throw new Error(`no database listener in the namespace: ${captured?.errors.join("; ") || "none handed over"}`);
      forwarder.attach(listener);
    },
    close: () => forwarder.close(),
  };
}
