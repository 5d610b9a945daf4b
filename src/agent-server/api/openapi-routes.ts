import type { Hono } from "hono";
import { z } from "zod";
import { mountDocs } from "../../http/docs-page.ts";
import type { AgentEnv } from "../context.ts";
import { json } from "./route-helpers.ts";
import { cancelManyBody } from "./run-cancel-routes.ts";
import * as s from "./schemas.ts";

type Method = "get" | "post" | "put" | "patch" | "delete";
/** One operation of the document: method, path (`{param}` form), tag, summary, JSON body. */
type Op = [Method, string, string, string, z.ZodType?];

/** The LangGraph server API this server answers, grouped as the published document groups it. */
const OPERATIONS: Op[] = [
  ["post", "/assistants", "Assistants", "Create an assistant", s.assistantCreate],
  ["post", "/assistants/search", "Assistants", "Search assistants", s.assistantSearch],
  ["post", "/assistants/count", "Assistants", "Count assistants", s.assistantCount],
  ["get", "/assistants/{assistant_id}", "Assistants", "Get an assistant"],
  ["patch", "/assistants/{assistant_id}", "Assistants", "Patch an assistant (a new version)", s.assistantPatch],
  ["delete", "/assistants/{assistant_id}", "Assistants", "Delete an assistant (200)"],
  ["get", "/assistants/{assistant_id}/graph", "Assistants", "Get the assistant's graph"],
  ["get", "/assistants/{assistant_id}/schemas", "Assistants", "Get the assistant's schemas"],
  ["get", "/assistants/{assistant_id}/subgraphs", "Assistants", "Get the assistant's subgraphs"],
  ["post", "/assistants/{assistant_id}/versions", "Assistants", "List versions", s.assistantVersions],
  ["post", "/assistants/{assistant_id}/latest", "Assistants", "Set the latest version", s.assistantLatest],
  ["post", "/threads", "Threads", "Create a thread", s.threadCreate],
  ["post", "/threads/search", "Threads", "Search threads", s.threadSearch],
  ["post", "/threads/count", "Threads", "Count threads", s.threadCount],
  ["get", "/threads/{thread_id}", "Threads", "Get a thread"],
  ["patch", "/threads/{thread_id}", "Threads", "Patch a thread", s.threadPatch],
  ["delete", "/threads/{thread_id}", "Threads", "Delete a thread"],
  ["post", "/threads/{thread_id}/copy", "Threads", "Copy a thread"],
  ["get", "/threads/{thread_id}/state", "Threads", "Get the thread's state"],
  ["post", "/threads/{thread_id}/state", "Threads", "Update the thread's state", s.stateUpdate],
  ["post", "/threads/{thread_id}/state/checkpoint", "Threads", "Get the state at a checkpoint", s.stateAtCheckpoint],
  ["post", "/threads/{thread_id}/history", "Threads", "Get the thread's history", s.history],
  ["get", "/threads/{thread_id}/stream", "Threads", "Follow the thread's runs (SSE)"],
  ["post", "/threads/{thread_id}/runs", "Thread Runs", "Create a background run", s.runCreate],
  ["get", "/threads/{thread_id}/runs", "Thread Runs", "List runs"],
  ["post", "/threads/{thread_id}/runs/stream", "Thread Runs", "Create a run and stream it (SSE)", s.runCreate],
  ["post", "/threads/{thread_id}/runs/wait", "Thread Runs", "Create a run and wait for its output", s.runCreate],
  ["get", "/threads/{thread_id}/runs/{run_id}", "Thread Runs", "Get a run"],
  ["delete", "/threads/{thread_id}/runs/{run_id}", "Thread Runs", "Delete a run"],
  ["get", "/threads/{thread_id}/runs/{run_id}/join", "Thread Runs", "Wait for a run"],
  ["get", "/threads/{thread_id}/runs/{run_id}/stream", "Thread Runs", "Join a run's stream (SSE)"],
  ["post", "/threads/{thread_id}/runs/{run_id}/cancel", "Thread Runs", "Cancel a run"],
  ["post", "/runs/stream", "Stateless Runs", "Stream a stateless run (SSE)", s.runCreate],
  ["post", "/runs/wait", "Stateless Runs", "Wait for a stateless run", s.runCreate],
  ["post", "/runs", "Stateless Runs", "Create a background stateless run", s.runCreate],
  ["post", "/runs/batch", "Stateless Runs", "Create a batch of stateless runs", s.runBatch],
  ["post", "/runs/cancel", "Stateless Runs", "Cancel runs in bulk (by ids or status)", cancelManyBody],
  ["post", "/runs/crons", "Crons", "Create a stateless cron"],
  ["post", "/runs/crons/search", "Crons", "Search crons"],
  ["put", "/store/items", "Store", "Put an item", s.storePut],
  ["get", "/store/items", "Store", "Get an item"],
  ["delete", "/store/items", "Store", "Delete an item", s.storeDelete],
  ["post", "/store/items/search", "Store", "Search items", s.storeSearch],
  ["post", "/store/namespaces", "Store", "List namespaces", s.storeNamespaces],
  ["post", "/mcp", "MCP", "Model Context Protocol (streamable HTTP): each assistant as a tool"],
  ["post", "/a2a/{assistant_id}", "A2A", "Agent2Agent JSON-RPC (message/send, message/stream, tasks/get)"],
  ["get", "/ok", "System", "Health check"],
  ["get", "/info", "System", "Server information"],
  ["get", "/metrics", "System", "Prometheus metrics"],
];

function bodySchema(schema: z.ZodType): Record<string, unknown> {
  try {
    const out = z.toJSONSchema(schema, { io: "input", unrepresentable: "any" }) as Record<string, unknown>;
    delete out.$schema;
    return out;
  } catch {
    // A schema zod cannot render (a transform) documents its body as any JSON rather than failing the document.
    return {};
  }
}

/** The OpenAPI 3.1 document of the operations above (pure, so it is built once). */
export function agentOpenApi(version: string): Record<string, unknown> {
  const paths: Record<string, Record<string, unknown>> = {};
  for (const [method, path, tag, summary, schema] of OPERATIONS) {
    const parameters = [...path.matchAll(/\{(\w+)\}/g)].map((m) => ({
      name: m[1],
      in: "path",
      required: true,
      schema: { type: "string" },
    }));
    paths[path] ??= {};
    paths[path][method] = {
      tags: [tag],
      summary,
      ...(parameters.length ? { parameters } : {}),
      ...(schema
        ? { requestBody: { required: true, content: { "application/json": { schema: bodySchema(schema) } } } }
        : {}),
      responses: {
        [method === "delete" && !path.startsWith("/assistants") ? "204" : "200"]: { description: "Success" },
        ...(schema || parameters.length
          ? { "422": { description: 'Validation error: {"detail": [{loc, msg, type}]}' } }
          : {}),
        "404": { description: "Not found" },
      },
    };
  }
  return { openapi: "3.1.0", info: { title: "LangGraph Platform (Wharf agent server)", version }, paths };
}

/** The paths that describe the API itself; public, like `/ok` and `/info`. */
export const DOC_PATHS = new Set([
  "/openapi.json",
  "/docs",
  "/docs/swagger-ui.css",
  "/docs/swagger-ui-bundle.js",
  "/docs/init.js",
]);

/** `GET /openapi.json` and `GET /docs` (Swagger UI from the local package). */
export function registerOpenApiRoutes(app: Hono<AgentEnv>, version: string): void {
  let doc: Record<string, unknown> | null = null;
  app.get("/openapi.json", () => json((doc ??= agentOpenApi(version))));
  mountDocs(app, "/openapi.json", "Agent server API");
}
