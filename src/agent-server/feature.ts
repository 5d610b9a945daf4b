import type http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { serve, type ServerType } from "@hono/node-server";
import { sql } from "kysely";
import { hardenServer, serverTimeouts } from "../http/connection-guard.ts";
import type { Feature, PlatformContext } from "../platform/context.ts";
import { createAgentServerApp, type AgentServer } from "./server.ts";

const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const EXAMPLE_PROJECT = path.join(repoRoot, "examples/chat-agent");

/** The PostgreSQL schema the platform's store uses, so checkpoints live beside the platform's tables. */
async function currentSchema(ctx: PlatformContext): Promise<string | undefined> {
  if (ctx.store.dialect !== "postgres") return undefined;
  const r = await sql<{ s: string }>`select current_schema() as s`.execute(ctx.db);
  return r.rows[0]?.s;
}

/**
 * `wharf up` serves the example agent at once, in-process, on `WHARF_AGENT_PORT` (default 8124;
 * 0 for an ephemeral port). `WHARF_AGENT_PROJECT` serves
 * another project, `off` none. Deployments will later run agent servers per revision instead.
 */
export function createAgentServerFeature(): Feature & { url(): string | null } {
  let agent: AgentServer | null = null;
  let server: ServerType | null = null;
  let agentServerUrl: string | null = null;
  return {
    name: "agent-server",
    url: () => agentServerUrl,
    async start(ctx) {
      const project = ctx.config.settings.WHARF_AGENT_PROJECT ?? EXAMPLE_PROJECT;
      if (project === "off") return;
      const port = ctx.config.settings.WHARF_AGENT_PORT;
      let url = "";
      try {
        agent = await createAgentServerApp({
          project,
          store: ctx.store,
          box: ctx.box,
          authenticate: ctx.authenticate,
          log: ctx.log,
          serverId: ctx.config.settings.WHARF_AGENT_SERVER_ID ?? `example:${path.basename(project)}`,
          home: ctx.config.home,
          databaseUrl: ctx.config.databaseUrl,
          pgSchema: await currentSchema(ctx),
          apiUrl: () => url,
        });
        const a = agent;
        server = await new Promise<ServerType>((resolve, reject) => {
          const s = serve(
            { fetch: a.app.fetch, hostname: ctx.config.host, port, serverOptions: serverTimeouts(ctx.config.settings) },
            () => resolve(s),
          );
          s.once("error", reject);
        });
        // It listens on the control plane's address: the same caps against floods of slow heads.
        hardenServer(server as http.Server, ctx.config.settings, ctx.log);
      } catch (err) {
        ctx.log.error({ err, project }, "the example agent server could not start");
        await agent?.close();
        agent = null;
        return;
      }
      const addr = server.address() as AddressInfo;
      url = `http://${addr.family === "IPv6" ? `[${addr.address}]` : addr.address}:${addr.port}`;
      const auth = agent.ctx.customAuth
        ? `custom auth from ${agent.project.auth?.file}`
        : "platform API key (X-Api-Key)";
      ctx.log.info({ url, project, graphs: [...agent.ctx.graphs.keys()], auth }, "agent server is up");
      agentServerUrl = url;
      if (process.stdout.isTTY || ctx.config.settings.WHARF_PRINT_AGENT_URL) {
        const sample =
          agent.ctx.customAuth && project === EXAMPLE_PROJECT ? `-H "Authorization: Bearer demo-token-alice" ` : "";
        process.stdout.write(
          `\nAgent server (${path.basename(project)}) at ${url}  [auth: ${auth}]\n` +
            `Try: curl -s ${sample}-H 'content-type: application/json' ${url}/runs/wait -d '{"assistant_id":"${[...agent.ctx.graphs.keys()][0]}","input":{"messages":[{"role":"human","content":"hi"}]}}'\n\n`,
        );
      }
    },
    async stop() {
      const s = server;
      server = null;
      agentServerUrl = null;
      if (s) {
        const closed = new Promise<void>((resolve) => s.close(() => resolve()));
        if ("closeIdleConnections" in s) (s as { closeIdleConnections(): void }).closeIdleConnections();
        await agent?.close();
        await Promise.race([closed, new Promise((r) => setTimeout(r, 3000).unref())]);
        if ("closeAllConnections" in s) (s as { closeAllConnections(): void }).closeAllConnections();
      } else await agent?.close();
      agent = null;
    },
  };
}
