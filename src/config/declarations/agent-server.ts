import { z } from "zod";
import { decl, int, flag, text } from "./declare.ts";

/** The settings of the agent server, the CLI and graph clients, and install. */
export const AGENT_SERVER_SETTINGS = {
  WHARF_AGENT_EGRESS_PROXIED: decl({
    part: "agent server",
    type: "0/1",
    default: "0",
    description:
      "set by the platform for a confined deployment's agent server, whose every connection goes through the egress proxy: runs' webhooks are left to the proxy's address policy instead of being checked in the server (elsewhere they are checked against `WHARF_EGRESS_ALLOW_INTERNAL`)",
    schema: flag(),
  }),
  WHARF_CRON_TICK_MS: decl({
    part: "agent server",
    type: "ms",
    default: "5000",
    description: "how often an agent server looks for due crons",
    schema: int(10, 3_600_000),
  }),
  WHARF_AGENT_PROJECT: decl({
    part: "agent server",
    type: "path",
    defaultText: "`examples/chat-agent`",
    description: "project the in-process agent server serves (`createAgentServerFeature`), or `off`",
    schema: text().optional(),
  }),
  WHARF_AGENT_PORT: decl({
    part: "agent server",
    type: "port",
    default: "8124",
    description: "port of the in-process agent server (0: any free port)",
    schema: int(0, 65535),
  }),
  WHARF_AGENT_SERVER_ID: decl({
    part: "agent server",
    type: "string",
    defaultText: "`example:<project folder>`",
    description: "server id of the in-process agent server (scopes its threads and runs)",
    schema: text().optional(),
  }),
  WHARF_PYTHON: decl({
    part: "agent server",
    type: "path",
    default: "python3",
    description: "interpreter (3.11 or newer) that creates the virtual environments of Python projects",
    schema: text(),
  }),
  WHARF_PYTHON_ENVS: decl({
    part: "agent server",
    type: "path",
    defaultText: "`$WHARF_HOME/python-envs`",
    description: "folder of the cached virtual environments of Python projects, one per dependency key",
    schema: text().optional(),
  }),
  WHARF_PYTHON_WORKERS: decl({
    part: "agent server",
    type: "integer",
    default: "1",
    description:
      "Python worker processes per served Python project; runs are spread over them (least busy first), so a graph that blocks its event loop delays only the runs of its own worker; each is restarted on its own. Also read from the project's `env`",
    schema: int(1, 64),
  }),
  WHARF_PRINT_AGENT_URL: decl({
    part: "agent server",
    type: "0/1",
    default: "0",
    description: "print the in-process agent server's URL and a sample call even without a terminal",
    schema: flag(),
  }),

  WHARF_URL: decl({
    part: "CLI and graph clients",
    type: "URL",
    defaultText: "`http://$WHARF_HOST:$WHARF_PORT`",
    description: "control plane the `wharf` commands and `getAccessToken` call",
    schema: z.string().url().optional(),
  }),
  WHARF_API_KEY: decl({
    part: "CLI and graph clients",
    type: "secret",
    defaultText: "`$WHARF_HOME/bootstrap-key`",
    description: "API key the `wharf` commands and `getAccessToken` send",
    schema: text().optional(),
  }),
  WHARF_TENANT_ID: decl({
    part: "CLI and graph clients",
    type: "id",
    defaultText: "the key's workspace",
    description: "workspace the `wharf` commands act on (`X-Tenant-Id`)",
    schema: text().optional(),
  }),

  WHARF_SKIP_HOST_SETUP: decl({
    part: "install",
    type: "0/1",
    default: "0",
    description: "1 keeps `npm install` from running `scripts/setup-host.sh` as root",
    schema: flag(),
  }),
} as const;
