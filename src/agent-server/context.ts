import type { Kysely } from "kysely";
import type { SecretBox } from "../crypto/secret-box.ts";
import type { Authenticate } from "../http/authenticate.ts";
import type { Logger } from "../log/logger.ts";
import type { Dialect } from "../store/database.ts";
import type { Database } from "../store/schema.ts";
import type { Checkpointer } from "./storage/checkpointer.ts";
import type { AuthContext, ProjectAuth } from "./auth/custom-auth.ts";
import type { UserApp } from "./project/http-app.ts";
import type { UiFile } from "./project/ui-bundles.ts";
import type { ProjectHttp } from "./project/project.ts";
import type { GraphFailure, LoadedGraph } from "./project/graphs.ts";
import type { GraphSchemaCache } from "./project/static-schemas.ts";
import type { PythonGraph, PythonHttpApp, PythonWorkers } from "./python/index.ts";
import type { AgentStore } from "./storage/store.ts";
import "./storage/tables.ts";

/** Everything the agent server's parts share: its identity, storage, graphs and auth. */
export interface AgentServerContext {
  /** The project or deployment this server belongs to; every row carries it. */
  serverId: string;
  db: Kysely<Database>;
  dialect: Dialect;
  /** JavaScript graphs (imported here) and Python graphs (served by `python`). */
  graphs: Map<string, LoadedGraph | PythonGraph>;
  /** The project's Python worker, when it has Python graphs. */
  python: PythonWorkers | null;
  /** Graphs of the project that failed to load (logged at start, listed by `/info`). */
  graphFailures: Map<string, GraphFailure>;
  checkpointer: Checkpointer;
  /** The LangGraph store (`/store/*`, and `config.store` / `getStore()` in graphs). */
  store: AgentStore;
  customAuth: ProjectAuth | null;
  /** Seals what a queued run must not keep in clear (the caller's user, forwarded headers). */
  box: SecretBox;
  /** The platform's API-key check, used when the project has no custom auth handler. */
  authenticate: Authenticate | null;
  /** `wharf dev`: no credentials required (loopback only). */
  open: boolean;
  log: Logger;
  /** `langgraph.json` `http`: disabled route groups and CORS. */
  http: ProjectHttp;
  /** The project's own routes (`http.app`), mounted before the API. */
  userApp: UserApp | null;
  /** `http.app` as a Python ASGI app, served by the Python worker. */
  pythonApp: PythonHttpApp | null;
  /** Schemas derived from the JavaScript graphs' TypeScript types (cached per source hash). */
  schemas: GraphSchemaCache;
  /** Built generative UI bundles (`ui`), by graph name. */
  ui: Map<string, UiFile[]>;
}

export interface AgentEnv {
  Variables: {
    auth: AuthContext | null;
    requestId: string;
  };
}
