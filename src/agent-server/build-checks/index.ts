/**
 * The child processes a deployment build runs to check a project the way this server will load it.
 * Exported as paths, not modules: a builder spawns them and never needs their imports itself.
 */
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

/** Imports a project's JavaScript graphs and auth; prints one JSON line. Argument: the langgraph.json. */
export const LOAD_CHECK_CHILD = path.join(here, "load-check-child.ts");

/** Keys, creates and checks a project's Python environment. Arguments: `key|create|check`, the langgraph.json, the envs folder. */
export const PYTHON_ENV_CHILD = path.join(here, "python-env-child.ts");
