import { execFile } from "node:child_process";
import path from "node:path";
import { promisify } from "node:util";
import type { AgentProject } from "../../src/agent-server/project/project.ts";
import { ensurePythonEnv } from "../../src/agent-server/python/python-env.ts";
import { createLogger } from "../../src/log/logger.ts";
import { TEST_PYTHON_ENVS } from "./requirements.ts";

const run = promisify(execFile);

/**
 * An interpreter with the official Python client (`langgraph-sdk` from PyPI), in a virtual
 * environment cached under {@link TEST_PYTHON_ENVS} (created once, with the server's own env builder).
 */
export async function sdkPython(): Promise<string> {
  const project = {
    dir: path.join(TEST_PYTHON_ENVS, "no-project"),
    dependencies: ["langgraph-sdk"],
  } as unknown as AgentProject;
  return ensurePythonEnv({
    project,
    python: process.env.WHARF_PYTHON || "python3",
    envsDir: TEST_PYTHON_ENVS,
    log: createLogger({ level: "silent" }),
  });
}

/** Runs a Python client script; rejects with its output when it fails. */
export async function runPythonClient(
  python: string,
  script: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<string> {
  try {
    const { stdout } = await run(python, [script, ...args], { env: { ...process.env, ...env }, timeout: 180_000 });
    return stdout;
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string };
    throw new Error(`${path.basename(script)} failed:\n${e.stdout ?? ""}${e.stderr ?? ""}`, { cause: err });
  }
}
