/**
 * The program a deployment revision runs inside its confinement (never imported by the platform):
 * the agent server of the revision's build, with its own database (a SQLite file in the private
 * state folder, or the deployment's own PostgreSQL schema and role), its own key (WHARF_MASTER_KEY
 * here is the deployment's agent key, never the platform's), listening on a unix socket in the
 * state folder, the only way in. The platform's `/deployments/{id}` proxy authenticates callers
 * and passes who they are in `x-wharf-principal` (it drops any copy a client sent).
 *   node --import tsx revision-server.ts --project DIR --socket PATH --state DIR --server-id ID [--exclusive]
 */
import fs from "node:fs";
import type { Server } from "node:http";
import { parseArgs } from "node:util";
import { createAdaptorServer } from "@hono/node-server";
import { attachProtocolUpgrades, createAgentServerApp } from "../../agent-server/index.ts";
import { loadKeyring } from "../../crypto/keyring.ts";
import { SecretBox } from "../../crypto/secret-box.ts";
import { unauthorized } from "../../http/errors.ts";
import type { Principal } from "../../http/principal.ts";
import { createLogger } from "../../log/logger.ts";
import { processEnvironment } from "../../config/index.ts";
import { openStore } from "../../store/database.ts";
import { migrateToLatest } from "../../store/migrate.ts";
import { AGENT_SERVER_KEEP_ALIVE_MS } from "./keep-alive.ts";
import { decodePrincipal, PRINCIPAL_HEADER } from "./principal-header.ts";

const { values } = parseArgs({
  options: {
    project: { type: "string" },
    socket: { type: "string" },
    state: { type: "string" },
    "server-id": { type: "string" },
    exclusive: { type: "boolean" },
  },
});
const { project, socket, state } = values as { project: string; socket: string; state: string };
const serverId = values["server-id"]!;
// What the platform handed this child: its settings are environment variables it set, read once here.
const env = processEnvironment();
const log = createLogger({ level: env.WHARF_LOG_LEVEL ?? "info" });
const agentKey = env.WHARF_MASTER_KEY;
if (!agentKey) throw new Error("WHARF_MASTER_KEY (the deployment's agent key) is not set");
// The deployment's own database: its PostgreSQL schema through its own role, else a file here.
const databaseUrl = env.WHARF_AGENT_DATABASE_URL ?? null;
const pgSchema = env.WHARF_AGENT_DATABASE_SCHEMA || undefined;
delete env.WHARF_AGENT_DATABASE_URL;
delete env.WHARF_AGENT_DATABASE_SCHEMA;

// The role's search path is its schema (set by the platform), and it may not create schemas: the
// store opens without one; the checkpointer, which names its tables' schema, gets it.
const store = await openStore({ databaseUrl, home: state });
await migrateToLatest(store);
const box = new SecretBox(loadKeyring(state, agentKey), () => null);

/** The proxy already checked the caller; here we only read what it says. */
const authenticate = async (headers: Headers): Promise<Principal> => {
  const p = decodePrincipal(headers.get(PRINCIPAL_HEADER));
  if (!p) throw unauthorized("Missing credentials: send an X-Api-Key header or Authorization: Bearer <token>");
  return p;
};

// `--exclusive`: the platform started this as the only server of the deployment's storage (no
// other revision of it runs anywhere), so runs still marked running belong to a dead process and
// are settled now rather than when their lease expires.
const agent = await createAgentServerApp({
  project,
  store,
  box,
  authenticate,
  log,
  serverId,
  home: state,
  databaseUrl,
  pgSchema,
  exclusive: values.exclusive === true,
  signalSecret: agentKey,
});
// Assistants follow the revision: those of graphs this build no longer has stop being listed
// (their threads stay readable; a graph that comes back gets its system assistant again).
const graphIds = [...agent.ctx.graphs.keys()];
if (graphIds.length)
  await store.db
    .deleteFrom("agent_assistants")
    .where("server_id", "=", serverId)
    .where("graph_id", "not in", graphIds)
    .execute();
fs.rmSync(socket, { force: true });
const server = createAdaptorServer({ fetch: agent.app.fetch }) as Server;
// The platform's proxy closes idle connections first (Node's 5 s default would race its reuse).
server.keepAliveTimeout = AGENT_SERVER_KEEP_ALIVE_MS;
attachProtocolUpgrades(server, agent);
await new Promise<void>((resolve, reject) => {
  server.once("error", reject);
  server.listen(socket, () => resolve());
});
fs.chmodSync(socket, 0o600);
console.log(`agent server ready on ${socket} (graphs: ${[...agent.ctx.graphs.keys()].join(", ")})`);

let stopping = false;
const shutdown = () => {
  if (stopping) process.exit(130);
  stopping = true;
  server.close();
  server.closeIdleConnections();
  void agent
    .close()
    .then(() => store.close())
    .then(
      () => process.exit(0),
      () => process.exit(1),
    );
  setTimeout(() => process.exit(0), 4000).unref();
};
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
