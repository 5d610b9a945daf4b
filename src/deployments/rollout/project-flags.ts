import path from "node:path";
import { readProjectFile } from "../build/project-file.ts";
import type { Database } from "../../store/schema.ts";

/** Whether a built project's `langgraph.json` names its own auth module (its callers then authenticate themselves). */
export function hasCustomAuth(configFile: string): boolean {
  try {
    const text = readProjectFile(path.dirname(configFile), path.basename(configFile));
    return text !== null && typeof (JSON.parse(text) as { auth?: { path?: unknown } }).auth?.path === "string";
  } catch {
    return false; // an unreadable or invalid config has no auth module (its build failed on it)
  }
}

/** The opt-in smoke input (`source_config.smoke_input`): a real run of every graph before DEPLOYED. */
export function smokeInputOf(deployment: Database["deployments"]): Record<string, unknown> | null {
  try {
    const v = (JSON.parse(deployment.source_config) as { smoke_input?: unknown }).smoke_input;
    return v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : null;
  } catch {
    return null;
  }
}
