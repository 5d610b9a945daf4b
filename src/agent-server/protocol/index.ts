import type http from "node:http";
import type { Hono } from "hono";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import { ProtocolService } from "./service.ts";
import { registerProtocolSseRoutes } from "./sse-routes.ts";
import { shareThroughRedis } from "./shared-log.ts";
import { ThreadLogs } from "./thread-log.ts";
import { attachProtocolWebSocket } from "./websocket.ts";

/** One protocol service per engine (per served project): the HTTP routes and the WebSocket share its thread logs. */
const services = new WeakMap<RunEngine, ProtocolService>();

function serviceFor(ctx: AgentServerContext, engine: RunEngine): ProtocolService {
  let s = services.get(engine);
  if (!s) {
    // Replicas: thread logs are shared through Redis, so any replica serves any thread's protocol.
    const store = engine.streams.threadEvents;
    s = new ProtocolService(ctx, engine, new ThreadLogs(store ? shareThroughRedis(store, ctx.log) : null));
    services.set(engine, s);
    engine.stopSignal.addEventListener("abort", () => s!.logs.close(), { once: true });
  }
  return s;
}

/** The event-based streaming protocol over HTTP: `POST /threads/{id}/commands` and SSE `POST /threads/{id}/stream/events`. */
export function registerProtocolRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext, engine: RunEngine): void {
  registerProtocolSseRoutes(app, ctx, serviceFor(ctx, engine), engine.stopSignal);
}

/** The protocol's WebSocket (`GET /threads/{id}/stream/events` with an upgrade) on the server that serves the app. */
export function attachProtocolUpgrades(
  server: http.Server,
  agent: { ctx: AgentServerContext; engine: RunEngine },
): void {
  attachProtocolWebSocket(server, agent.ctx, serviceFor(agent.ctx, agent.engine), agent.engine.stopSignal);
}
