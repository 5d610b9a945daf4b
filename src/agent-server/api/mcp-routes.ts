import type { Hono } from "hono";
import type { Server } from "@modelcontextprotocol/sdk/server/index.js";
import type { CallToolResult, Tool } from "@modelcontextprotocol/sdk/types.js";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { isPythonGraph } from "../python/index.ts";
import { graphSchemas } from "../project/graph-schemas.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import type { Assistant } from "../storage/assistants.ts";
import { CORS_HEADERS } from "../wire.ts";
import { invokeAssistant, outputText, visibleAssistants } from "./assistant-invoke.ts";
import { sharedJsonBody } from "./json-body.ts";
import type { C } from "./route-helpers.ts";

/** MCP tool names are `[A-Za-z0-9_-]{1,64}`: an assistant's name made into one, unique among the list. */
export function toolNames(assistants: ReadonlyArray<Pick<Assistant, "assistant_id" | "name">>): Map<string, string> {
  const out = new Map<string, string>();
  const taken = new Set<string>();
  for (const a of assistants) {
    let name = a.name.replace(/[^A-Za-z0-9_-]+/g, "_").slice(0, 64) || "assistant";
    if (taken.has(name)) name = `${name.slice(0, 55)}_${a.assistant_id.replace(/-/g, "").slice(0, 8)}`;
    taken.add(name);
    out.set(name, a.assistant_id);
  }
  return out;
}

const ANY_OBJECT = { type: "object" as const, additionalProperties: true };

/** The tool's input schema: the graph's input schema when it is an object schema, else any object. */
async function inputSchema(ctx: AgentServerContext, a: Assistant): Promise<Tool["inputSchema"]> {
  const loaded = ctx.graphs.get(a.graph_id);
  if (!loaded || isPythonGraph(loaded)) return ANY_OBJECT;
  try {
    // Listing tools never waits for the type checker: derived schemas only when already known.
    const graph = await loaded.get({ configurable: (a.config.configurable as Record<string, unknown>) ?? {} }, null);
    const schema = (await graphSchemas(graph, ctx.schemas.sources(a.graph_id, false))).input_schema as
      Tool["inputSchema"] | null;
    return schema && schema.type === "object" ? schema : ANY_OBJECT;
  } catch {
    return ANY_OBJECT; // a factory that needs a thread's config: the tool still lists, with a loose schema
  }
}

type McpSdk = typeof import("@modelcontextprotocol/sdk/server/index.js") &
  typeof import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js") &
  typeof import("@modelcontextprotocol/sdk/types.js");
let sdk: Promise<McpSdk> | null = null;

/**
 * The MCP SDK, loaded on the first `/mcp` request: with what it pulls in (a JSON Schema validator)
 * it is some 200 modules, a tenth of the agent server's start, for an endpoint most servers never see.
 */
function mcpSdk(): Promise<McpSdk> {
  sdk ??= Promise.all([
    import("@modelcontextprotocol/sdk/server/index.js"),
    import("@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js"),
    import("@modelcontextprotocol/sdk/types.js"),
  ]).then(([server, transport, types]) => ({ ...server, ...transport, ...types }));
  return sdk;
}

/** One MCP server per request (stateless streamable HTTP): tools are the caller's visible assistants. */
function mcpServer(ctx: AgentServerContext, engine: RunEngine, c: C, mcp: McpSdk): Server {
  const { Server, ListToolsRequestSchema, CallToolRequestSchema } = mcp;
  const server = new Server({ name: "wharf-agent-server", version: "0.1.0" }, { capabilities: { tools: {} } });
  let names: Map<string, string> | null = null;
  const assistants = async () => {
    const list = await visibleAssistants(ctx, c);
    names = toolNames(list);
    return list;
  };
  server.setRequestHandler(ListToolsRequestSchema, async () => {
    const list = await assistants();
    const byId = new Map([...names!].map(([n, id]) => [id, n]));
    return {
      tools: await Promise.all(
        list.map(async (a) => ({
          name: byId.get(a.assistant_id)!,
          description: a.description ?? `Runs the ${a.graph_id} agent`,
          inputSchema: await inputSchema(ctx, a),
        })),
      ),
    };
  });
  server.setRequestHandler(CallToolRequestSchema, async (req, extra): Promise<CallToolResult> => {
    if (!names) await assistants();
    const assistantId = names!.get(req.params.name);
    if (!assistantId) return { isError: true, content: [{ type: "text", text: `Unknown tool "${req.params.name}"` }] };
    const token = req.params._meta?.progressToken;
    let step = 0;
    // With a progress token the client streams: one progress notification per graph step.
    const onEvent =
      token === undefined
        ? null
        : async (e: { data: unknown }) => {
            step += 1;
            const nodes = e.data && typeof e.data === "object" ? Object.keys(e.data).join(", ") : "";
            await extra.sendNotification({
              method: "notifications/progress",
              params: { progressToken: token, progress: step, message: nodes },
            });
          };
    const result = await invokeAssistant(
      engine,
      c.get("auth"),
      c.req.raw.headers,
      { assistantId, threadId: null, input: req.params.arguments ?? {} },
      onEvent,
      extra.signal,
    );
    if (result.error)
      return { isError: true, content: [{ type: "text", text: `${result.error.error}: ${result.error.message}` }] };
    return { content: [{ type: "text", text: outputText(result.values) }] };
  });
  return server;
}

/**
 * `/mcp`: the Model Context Protocol over streamable HTTP (stateless), each assistant the caller
 * may see as a tool, behind the project's authentication as every API route; a call is a
 * stateless run as that caller. Only POST carries messages (no server-initiated stream): GET and
 * DELETE answer 405, as a stateless MCP server does.
 */
export function registerMcpRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext, engine: RunEngine): void {
  app.post("/mcp", async (c) => {
    const mcp = await mcpSdk();
    const server = mcpServer(ctx, engine, c, mcp);
    const transport = new mcp.WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined });
    await server.connect(transport);
    c.req.raw.signal.addEventListener("abort", () => void server.close(), { once: true });
    const shared = sharedJsonBody(c.req);
    const parsedBody = shared ? await shared.catch(() => undefined) : undefined;
    return transport.handleRequest(c.req.raw, parsedBody === undefined ? undefined : { parsedBody });
  });
  const notAllowed = () =>
    new Response(
      JSON.stringify({
        jsonrpc: "2.0",
        error: { code: -32000, message: "Method not allowed: this MCP server is stateless (POST only)" },
        id: null,
      }),
      { status: 405, headers: { ...CORS_HEADERS, allow: "POST", "content-type": "application/json" } },
    );
  app.get("/mcp", notAllowed);
  app.delete("/mcp", notAllowed);
}
