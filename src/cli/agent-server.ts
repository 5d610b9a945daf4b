import type { Command } from "commander";
import { loadConfigOrExit } from "./config-or-exit.ts";
import { installFaultPolicy } from "../platform/process-faults.ts";

const LOOPBACK = new Set(["127.0.0.1", "::1", "localhost"]);

/** Runs one agent server process for a project (used by `wharf dev` and by deployments per revision). */
export function registerAgentServer(program: Command): void {
  program
    .command("agent-server")
    .description("serve one LangGraph project (langgraph.json) as an agent server process")
    .requiredOption("--project <dir>", "project folder with langgraph.json")
    .option("--host <host>", "address to listen on", "127.0.0.1")
    .option("--port <port>", "port to listen on", (v) => Number(v), 2024)
    .option("--server-id <id>", "which project/deployment the stored rows belong to (default: from the project path)")
    .option("--open", "no credentials required (wharf dev; loopback addresses only)")
    .option(
      "--exclusive",
      "no other process serves this server id: runs left running by a crashed one are settled at start",
    )
    .option(
      "--warm-schemas",
      "derive the graphs' schemas from their TypeScript types in the background at start (wharf dev: Studio asks for them at once)",
    )
    .action(serveAgentServer);
}

interface AgentServerOptions {
  project: string;
  host: string;
  port: number;
  serverId?: string;
  open?: boolean;
  exclusive?: boolean;
  warmSchemas?: boolean;
}

async function serveAgentServer(opts: AgentServerOptions): Promise<void> {
  const config = loadConfigOrExit();
  if (opts.open && !LOOPBACK.has(opts.host)) {
    console.error(
      `wharf: --open serves without credentials and is only allowed on a loopback address, not ${opts.host}`,
    );
    process.exit(2);
  }
  // The project's Python workers start importing its graphs now, while the server's own modules
  // load below (imported here, not at the top, for that reason).
  const [{ createLogger }, { readSetting }, { prestartPython }] = await Promise.all([
    import("../log/logger.ts"),
    import("../config/index.ts"),
    import("../agent-server/python/prestart.ts"),
  ]);
  const log = createLogger({ level: readSetting("WHARF_LOG_LEVEL") });
  const earlyPython = prestartPython({
    projectDir: opts.project,
    home: config.home,
    databaseUrl: config.databaseUrl,
    log,
  });
  let running;
  try {
    const { startAgentServer } = await import("../agent-server/index.ts");
    running = await startAgentServer({
      projectDir: opts.project,
      host: opts.host,
      port: opts.port,
      databaseUrl: config.databaseUrl,
      home: config.home,
      open: opts.open,
      serverId: opts.serverId,
      exclusive: opts.exclusive,
      warmSchemas: opts.warmSchemas,
      log,
      earlyPython,
    });
  } catch (err) {
    console.error(`wharf: cannot start the agent server: ${(err as Error).message}`);
    process.exit(1);
  }
  const auth = running.server.ctx.customAuth
    ? `custom auth (${running.server.project.auth?.file})`
    : opts.open
      ? "OPEN: no credentials required (loopback only)"
      : "platform API key required (X-Api-Key)";
  // A fault of one stream or connection is contained; any other ends this process, which the
  // platform starts again with backoff (deployments) or the developer sees (wharf dev).
  installFaultPolicy(running.server.ctx.log);
  console.log(
    `agent server ready at ${running.url} (graphs: ${[...running.server.ctx.graphs.keys()].join(", ")}; ${auth})`,
  );
  let signals = 0;
  const shutdown = () => {
    if (++signals > 1) process.exit(130);
    running
      .stop()
      .then(() => process.exit(0))
      .catch(() => process.exit(1));
  };
  process.on("SIGTERM", shutdown);
  process.on("SIGINT", shutdown);
}
