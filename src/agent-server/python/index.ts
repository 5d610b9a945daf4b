/**
 * Python graphs: a long-lived Python worker per served project (`python/wharf_worker`) executes
 * them and owns their checkpoints; this side keeps the API, run rows, queueing and SSE.
 */
import path from "node:path";
import type { Logger } from "../../log/logger.ts";
import type { GraphFailure } from "../project/graphs.ts";
import type { AgentProject } from "../project/project.ts";
import { AuthCache } from "./auth-cache.ts";
import { PythonAuth } from "./python-auth.ts";
import { PythonGraph } from "./python-graph.ts";
import { PythonHttpApp } from "./python-http.ts";
import { ensurePythonEnv } from "./python-env.ts";
import { PythonWorkers } from "./worker-pool.ts";
import type { CheckpointerSpec, WorkerHello } from "./worker.ts";

export { isPythonGraph, PythonGraph } from "./python-graph.ts";
export { createPythonEnv, ensurePythonEnv, PythonEnvError, pythonEnvKey } from "./python-env.ts";
export { gitDependencyUrl, pipConfigIndexes, pipConfigUrls, uvLockUrls } from "./pip-config.ts";
export { pythonStoreBatch, type PythonStoreOp } from "./store-bridge.ts";
export { PythonWorker, WorkerCrashed } from "./worker.ts";
export { PythonWorkers } from "./worker-pool.ts";
export { PythonHttpApp } from "./python-http.ts";

export interface PythonRuntime {
  worker: PythonWorkers;
  graphs: Map<string, PythonGraph>;
  failures: Map<string, GraphFailure>;
  /** The project's Python `Auth`, when `auth.path` names one. */
  auth: PythonAuth | null;
  /** `store.index.embed` computed in Python, when the project's index names a Python function or a provider. */
  embed: ((texts: string[]) => Promise<number[][]>) | null;
  /** `http.app` when it is a Python ASGI app. */
  http: PythonHttpApp | null;
}

export interface PythonRuntimeOptions {
  project: AgentProject;
  /** The server's state folder: the Python checkpointer's SQLite file lives there (without PostgreSQL). */
  home: string;
  /** The server's PostgreSQL (and schema), where Python graphs checkpoint too when set. */
  databaseUrl?: string | null;
  pgSchema?: string;
  /** Worker processes (`WHARF_PYTHON_WORKERS`). */
  workers?: number;
  python: string;
  envsDir: string;
  log: Logger;
}

/** A project's workers spawned (environment ready, processes started), their hello still to come. */
export interface PythonLaunch {
  worker: PythonWorkers;
  hello: Promise<WorkerHello>;
}

/**
 * Prepares the project's environment and spawns its workers without waiting for them to import the
 * graphs; null without Python graphs, auth or http.app. `wharf agent-server` calls it before it
 * loads the rest of the server, so the workers' imports (seconds: langgraph and the project's
 * libraries) run while Node loads its own modules.
 */
export async function launchPythonWorkers(o: PythonRuntimeOptions): Promise<PythonLaunch | null> {
  const specs = o.project.graphs.filter((g) => g.runtime === "python");
  const authRef = o.project.auth?.runtime === "python" ? o.project.auth.ref : null;
  const embedRef = o.project.store.index?.embed.runtime === "python" ? o.project.store.index.embed.ref : null;
  const httpRef = o.project.http.app?.runtime === "python" ? o.project.http.app.ref : null;
  if (!specs.length && !authRef && !httpRef) return null;
  const python = await ensurePythonEnv({ project: o.project, python: o.python, envsDir: o.envsDir, log: o.log });
  const worker = new PythonWorkers(
    {
      python,
      projectDir: o.project.dir,
      graphs: Object.fromEntries(specs.map((g) => [g.graphId, g.ref])),
      auth: authRef,
      embed: embedRef,
      httpApp: httpRef,
      checkpointer: checkpointerSpec(o),
      log: o.log,
    },
    o.workers ?? 1,
  );
  const hello = worker.start();
  // Awaited by startPythonRuntime; a failed start must not be an unhandled rejection meanwhile.
  hello.catch(() => {
    // Seen and reported by startPythonRuntime.
  });
  return { worker, hello };
}

/**
 * Prepares the project's environment, starts its worker and waits for its graphs; null without
 * Python graphs or auth. `early` is a launch already under way for the same project and settings.
 */
export async function startPythonRuntime(o: PythonRuntimeOptions, early?: Promise<PythonLaunch | null>): Promise<PythonRuntime | null> {
  const specs = o.project.graphs.filter((g) => g.runtime === "python");
  const authRef = o.project.auth?.runtime === "python" ? o.project.auth.ref : null;
  const embedRef = o.project.store.index?.embed.runtime === "python" ? o.project.store.index.embed.ref : null;
  const httpRef = o.project.http.app?.runtime === "python" ? o.project.http.app.ref : null;
  const launch = await (early ?? launchPythonWorkers(o));
  if (!launch) return null;
  const { worker } = launch;
  let hello;
  try {
    hello = await launch.hello;
  } catch (err) {
    // Not started (`sys.exit` or `os._exit` at import, a missing module): no restarts behind a failed start.
    await worker.stop();
    throw err;
  }
  if (hello.auth_error) {
    await worker.stop();
    // As for a JavaScript auth file: a project whose auth does not load does not serve.
    throw new Error(`cannot load auth ${authRef}: ${hello.auth_error}`);
  }
  const graphs = new Map<string, PythonGraph>();
  const failures = new Map<string, GraphFailure>();
  for (const g of specs) {
    if (hello.graphs[g.graphId]) graphs.set(g.graphId, new PythonGraph(g.graphId, g.description, worker));
    else failures.set(g.graphId, hello.errors[g.graphId] ?? { module: g.ref, error: "not loaded" });
  }
  const cacheConfig = o.project.auth?.cache;
  const auth = hello.auth ? new PythonAuth(worker, hello.auth, o.project.auth?.disableStudioAuth ?? false, cacheConfig ? new AuthCache(cacheConfig) : null) : null;
  if (hello.http_error) {
    await worker.stop();
    // As for a JavaScript app: the routes are part of the API, a project without them does not serve.
    throw new Error(`cannot load http.app ${httpRef}: ${hello.http_error}`);
  }
  if (embedRef && hello.embed_error) {
    // A function of the project that does not load fails the start, as a JavaScript one does; a provider it cannot resolve turns semantic search off.
    if (/\.py:/.test(embedRef) || embedRef.startsWith(".")) {
      await worker.stop();
      throw new Error(`cannot load store.index.embed ${embedRef}: ${hello.embed_error}`);
    }
    o.log.warn({ embed: embedRef }, `store.index.embed: ${hello.embed_error}`);
  }
  const embed = embedRef && !hello.embed_error ? (texts: string[]) => worker.call<number[][]>("store.embed", { texts }) : null;
  return { worker, graphs, failures, auth, embed, http: httpRef ? new PythonHttpApp(worker) : null };
}

/** Where the Python graphs checkpoint (pure): the server's PostgreSQL in its schema, else a SQLite file of their own; `checkpointer.path`/`serde` as given. */
export function checkpointerSpec(o: Pick<PythonRuntimeOptions, "project" | "home" | "databaseUrl" | "pgSchema">): CheckpointerSpec {
  const own = { path_ref: o.project.pythonCheckpointer.path, serde: o.project.pythonCheckpointer.serde };
  if (o.databaseUrl && /^postgres(ql)?:\/\//.test(o.databaseUrl)) return { kind: "postgres", url: o.databaseUrl, ...(o.pgSchema ? { schema: o.pgSchema } : {}), ...own };
  return { kind: "sqlite", path: path.join(o.home, "python-checkpoints.sqlite"), ...own };
}
