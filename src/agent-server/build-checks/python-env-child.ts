/**
 * Run as a confined build step (never imported by the platform) for projects with Python graphs or
 * Python auth: `key` prints the key of the project's environment, `create` creates it (at the very
 * path the agent server will find it at: venvs hard-code their own path), `check` starts the
 * project's Python worker once and prints which graphs and auth imported. One JSON line on stdout.
 * Usage: python-env-child.ts <key|create|check> <langgraph.json> <envs folder>
 */
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createLogger } from "../../log/logger.ts";
import { loadProject } from "../project/project.ts";
import { createPythonEnv, pythonEnvKey, startPythonRuntime } from "../python/index.ts";

const [mode, configFile, envsDir] = process.argv.slice(2);
const log = createLogger({ level: "warn", destination: process.stderr });
const project = loadProject(configFile);
const opts = { project, python: "python3", envsDir, log };
const print = (v: unknown) => process.stdout.write("\n" + JSON.stringify(v) + "\n");

try {
  if (mode === "key") print({ key: await pythonEnvKey(opts) });
  else if (mode === "create") print(await createPythonEnv(opts));
  else if (mode === "check") {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-check-"));
    const runtime = await startPythonRuntime({ ...opts, home });
    const graphs = [...(runtime?.graphs.keys() ?? [])].map((id) => ({ id, ok: true }));
    for (const [id, f] of runtime?.failures ?? [])
      graphs.push({ id, ok: false, error: `${f.module}: ${f.error}` } as { id: string; ok: boolean });
    await runtime?.worker.stop();
    print({ graphs, auth: null });
  } else throw new Error(`unknown mode ${mode}`);
} catch (err) {
  // A start that fails as a whole (auth, `python_version`, the interpreter ending at import) is the build's error.
  print({ error: (err as Error).message });
}
process.exit(0);
