import { execFile } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

/**
 * The official deploy clients, installed once from their registries into a cache under /tmp (the
 * JS one pulls in a whole agent server: too heavy for Wharf's own devDependencies).
 */
export const JS_CLI_VERSION = "1.5.1";
export const PY_CLI_VERSION = "0.4.40";
const CACHE = path.join(os.tmpdir(), "wharf-official-deploy-clis");

export interface CliRun {
  code: number;
  out: string;
}

function exec(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<CliRun> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      {
        cwd: opts.cwd,
        env: opts.env ?? (process.env as Record<string, string>),
        timeout: opts.timeoutMs ?? 300_000,
        maxBuffer: 16 << 20,
      },
      (err, stdout, stderr) => {
        resolve({ code: err ? (typeof err.code === "number" ? err.code : 1) : 0, out: `${stdout}${stderr}` });
      },
    );
  });
}

async function once(marker: string, install: () => Promise<CliRun>): Promise<void> {
  if (fs.existsSync(marker)) return;
  const r = await install();
  if (r.code !== 0) throw new Error(`installing a deploy CLI failed:\n${r.out.slice(-4000)}`);
  fs.writeFileSync(marker, "");
}

/** `langgraphjs` of npm's `@langchain/langgraph-cli`. */
export async function jsCli(): Promise<string> {
  const dir = path.join(CACHE, `npm-${JS_CLI_VERSION}`);
  fs.mkdirSync(dir, { recursive: true });
  if (!fs.existsSync(path.join(dir, "package.json")))
    fs.writeFileSync(path.join(dir, "package.json"), '{"private":true}\n');
  await once(path.join(dir, ".installed"), () =>
    exec(
      "npm",
      ["install", "--no-audit", "--no-fund", "--ignore-scripts", `@langchain/langgraph-cli@${JS_CLI_VERSION}`],
      { cwd: dir },
    ),
  );
  return path.join(dir, "node_modules", ".bin", "langgraphjs");
}

/** `langgraph` of PyPI's `langgraph-cli`, in a venv of its own. */
export async function pyCli(): Promise<string> {
  const dir = path.join(CACHE, `venv-${PY_CLI_VERSION}`);
  await once(path.join(CACHE, `.venv-${PY_CLI_VERSION}`), async () => {
    fs.mkdirSync(CACHE, { recursive: true });
    const v = await exec("python3", ["-m", "venv", dir]);
    if (v.code !== 0) return v;
    return exec(path.join(dir, "bin", "pip"), ["install", "-q", `langgraph-cli==${PY_CLI_VERSION}`]);
  });
  return path.join(dir, "bin", "langgraph");
}

/**
 * Runs a CLI the way a user would, pointed at the test platform. Anything that would leave the
 * machine goes to a dead loopback proxy instead (analytics are off too).
 */
export function runCli(
  bin: string,
  args: string[],
  opts: { cwd: string; apiKey: string; home: string },
): Promise<CliRun> {
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "/usr/bin:/bin",
    HOME: opts.home,
    LANGSMITH_API_KEY: opts.apiKey,
    LANGGRAPH_CLI_NO_ANALYTICS: "1",
    NO_COLOR: "1",
    TERM: "dumb",
    HTTP_PROXY: "http://127.0.0.1:9",
    HTTPS_PROXY: "http://127.0.0.1:9",
    NO_PROXY: "127.0.0.1,localhost",
  };
  return exec(bin, args, { cwd: opts.cwd, env, timeoutMs: 180_000 });
}
