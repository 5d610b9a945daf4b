import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import { loadProject } from "../agent-server/index.ts";
import { processEnvironment } from "../config/index.ts";

const wharfBin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../bin/wharf.js");
/** Folders whose changes never restart the server: dependencies and build output. */
const IGNORED_DIRS = new Set(["node_modules", "dist", "build", "out", "coverage", "__pycache__"]);
/** Files editors and tools write next to sources: swap files, logs, databases. */
const IGNORED_FILES = /(\.pyc|\.swp|\.swx|~|\.log|\.db|\.db-wal|\.db-shm|\.db-journal|\.sqlite|\.tsbuildinfo)$|^4913$/;

/**
 * Whether a change (path relative to the project) restarts `wharf dev`. Dot-folders (`.git`,
 * `.wharf`, `.langgraph_api` written by other tools, `.next`, …), dependencies and build output
 * do not; `.env` files do (they are the project's environment). Pure: table-tested.
 */
export function shouldReload(file: string): boolean {
  const parts = file.split(/[\\/]+/).filter(Boolean);
  if (parts.length === 0) return false;
  const name = parts[parts.length - 1];
  // `pip install -e` writes `*.egg-info` into a Python project: installing must not restart the server.
  for (const dir of parts.slice(0, -1))
    if (dir.startsWith(".") || IGNORED_DIRS.has(dir) || dir.endsWith(".egg-info")) return false;
  if (IGNORED_DIRS.has(name) || IGNORED_FILES.test(name) || name.endsWith(".egg-info")) return false;
  if (name.startsWith(".")) return name === ".env" || name.startsWith(".env.");
  return true;
}

/**
 * `wharf dev [dir]`: serves a project on 127.0.0.1:2024 without credentials (custom auth applies
 * if the project has one) and restarts the server when a file of the project changes.
 */
export function registerDev(program: Command): void {
  program
    .command("dev [dir]")
    .description("serve a LangGraph project for development on 127.0.0.1:2024, reloading on change")
    .option("--port <port>", "port to listen on", (v) => Number(v), 2024)
    .action(async (dir: string | undefined, opts: { port: number }) => {
      const projectDir = path.resolve(dir ?? ".");
      try {
        loadProject(projectDir);
      } catch (err) {
        console.error(`wharf: ${(err as Error).message}`);
        process.exit(1);
      }
      let child: ChildProcess | null = null;
      let restarting = false;
      const startChild = () => {
        child = spawn(
          process.execPath,
          [
            wharfBin,
            "agent-server",
            "--project",
            projectDir,
            "--host",
            "127.0.0.1",
            "--port",
            String(opts.port),
            "--open",
            "--warm-schemas",
          ],
          {
            stdio: "inherit",
            env: {
              ...processEnvironment(),
              WHARF_HOME: processEnvironment().WHARF_HOME ?? path.join(projectDir, ".wharf"),
            },
          },
        );
        child.on("exit", (code) => {
          child = null;
          if (!restarting && code !== 0 && code !== null)
            console.error(`wharf dev: the server exited (${code}); waiting for a change to restart`);
        });
      };
      const restart = async () => {
        restarting = true;
        const c = child as ChildProcess | null;
        if (c) {
          const exited = new Promise((r) => c.once("exit", r));
          c.kill("SIGTERM");
          await exited;
        }
        restarting = false;
        console.log("wharf dev: change detected, restarting");
        startChild();
      };
      console.log(
        `wharf dev: serving ${projectDir} on http://127.0.0.1:${opts.port} (open on loopback: no credentials needed unless the project has custom auth)\nStudio: http://127.0.0.1:${opts.port}/console/`,
      );
      startChild();
      let pending: NodeJS.Timeout | null = null;
      fs.watch(projectDir, { recursive: true }, (_event, file) => {
        if (file && !shouldReload(String(file))) return;
        if (pending) clearTimeout(pending);
        pending = setTimeout(() => void restart(), 200);
      });
      const stop = () => {
        (child as ChildProcess | null)?.kill("SIGTERM");
        process.exit(0);
      };
      process.on("SIGINT", stop);
      process.on("SIGTERM", stop);
    });
}
