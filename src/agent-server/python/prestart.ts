/**
 * The Python workers of a served project, spawned before the rest of the agent server loads:
 * `wharf agent-server` (`wharf dev`, each deployment revision) calls this first, so the workers
 * import langgraph and the project's graphs (seconds) while Node loads its own modules, instead of
 * after them. Imports here stay few and light for that reason.
 */
import path from "node:path";
import { readSetting } from "../../config/index.ts";
import type { Logger } from "../../log/logger.ts";
import { applyProjectEnv, loadProject } from "../project/project.ts";
import { launchPythonWorkers, type PythonLaunch } from "./index.ts";

export interface PrestartOptions {
  projectDir: string;
  home: string;
  databaseUrl: string | null;
  pgSchema?: string;
  log: Logger;
}

/** The worker settings, read after the project's env is applied (a project may ask for several workers itself). */
export function pythonSettings(home: string): { workers?: number; python: string; envsDir: string } {
  return { workers: readSetting("WHARF_PYTHON_WORKERS"), python: readSetting("WHARF_PYTHON"), envsDir: readSetting("WHARF_PYTHON_ENVS") ?? path.join(home, "python-envs") };
}

/**
 * Starts the project's Python workers early; the promise is handed to the agent server, which
 * waits for their hello where it would have started them. A project that does not load resolves
 * null here: the server's own load reports it as it always does.
 */
export function prestartPython(o: PrestartOptions): Promise<PythonLaunch | null> {
  const launch = (async () => {
    let project;
    try {
      project = loadProject(o.projectDir);
    } catch {
      // Reported by the server's own load of the same project, with its usual message.
      return null;
    }
    applyProjectEnv(project);
    return launchPythonWorkers({ project, home: o.home, databaseUrl: o.databaseUrl, pgSchema: o.pgSchema, ...pythonSettings(o.home), log: o.log });
  })();
  launch.catch(() => {
    // Awaited by the server's start, which reports the failure.
  });
  return launch;
}
