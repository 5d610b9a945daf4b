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
import { ensurePythonEnv } from "./python-env.ts";
import { PythonWorker } from "./worker.ts";

export { isPythonGraph, PythonGraph } from "./python-graph.ts";
export { ensurePythonEnv, PythonEnvError, pythonEnvKey } from "./python-env.ts";
export { pythonStoreBatch, type PythonStoreOp } from "./store-bridge.ts";
export { PythonWorker, WorkerCrashed } from "./worker.ts";

export interface PythonRuntime {
  worker: PythonWorker;
  graphs: Map<string, PythonGraph>;
  failures: Map<string, GraphFailure>;
  /** The project's Python `Auth`, when `auth.path` names one. */
  auth: PythonAuth | null;
}

export interface PythonRuntimeOptions {
  project: AgentProject;
  /** The server's state folder: the Python checkpointer's SQLite file lives there. */
  home: string;
  python: string;
  envsDir: string;
  log: Logger;
}

/** Prepares the project's environment, starts its worker and waits for its graphs; null without Python graphs or auth. */
export async function startPythonRuntime(o: PythonRuntimeOptions): Promise<PythonRuntime | null> {
  const specs = o.project.graphs.filter((g) => g.runtime === "python");
  const authRef = o.project.auth?.runtime === "python" ? o.project.auth.ref : null;
  if (!specs.length && !authRef) return null;
  const python = await ensurePythonEnv({ project: o.project, python: o.python, envsDir: o.envsDir, log: o.log });
  const worker = new PythonWorker({
    python,
    projectDir: o.project.dir,
    graphs: Object.fromEntries(specs.map((g) => [g.graphId, g.ref])),
    auth: authRef,
    checkpointPath: path.join(o.home, "python-checkpoints.sqlite"),
    log: o.log,
  });
  let hello;
  try {
    hello = await worker.start();
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
  return { worker, graphs, failures, auth };
}
