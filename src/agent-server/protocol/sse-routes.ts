import type { Hono } from "hono";
import { z } from "zod";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { AgentError, parseWith, readJson } from "../errors.ts";
import { json, uuidAt } from "../api/route-helpers.ts";
import { ValidationFailed } from "../../http/errors.ts";
import { sseFrame } from "../wire.ts";
import { followSse } from "../api/sse-follow.ts";
import { checkThreadAccess } from "./access.ts";
import { eventsBody, matches, unknownChannels, type EventFilter } from "./filters.ts";
import type { ProtocolService } from "./service.ts";

/** A protocol command: an integer id and a method; its params are the method's business. */
export const commandBody = z.object({
  id: z.number().int().nonnegative(),
  method: z.string().min(1),
  params: z.record(z.string(), z.unknown()).optional(),
});

/**
 * The HTTP side of the event-based protocol: `POST /threads/{id}/commands` answers a command in
 * its body; `POST /threads/{id}/stream/events` is an SSE stream of the thread's events that match
 * the body's filter, from `since` on (else every event kept), open until the client leaves.
 */
export function registerProtocolSseRoutes(
  app: Hono<AgentEnv>,
  ctx: AgentServerContext,
  service: ProtocolService,
  stopSignal: AbortSignal,
): void {
  app.post("/threads/:thread_id/commands", async (c) => {
    const threadId = uuidAt(c, "thread_id");
    const command = parseWith("body", commandBody, await readJson(c.req));
    return json(await service.handle(threadId, command, { auth: c.get("auth"), headers: c.req.raw.headers }), 200);
  });

  app.get("/threads/:thread_id/stream/events", () => {
    throw new AgentError(
      426,
      "The protocol's GET /threads/{id}/stream/events is a WebSocket: send an Upgrade request, or POST for SSE",
      { upgrade: "websocket" },
    );
  });

  app.post("/threads/:thread_id/stream/events", async (c) => {
    const threadId = uuidAt(c, "thread_id");
    const b = parseWith("body", eventsBody, await readJson(c.req));
    const unknown = unknownChannels(b.channels);
    if (unknown.length) {
      throw new ValidationFailed(
        unknown.map((ch) => ({
          loc: ["body", "channels", b.channels.indexOf(ch)],
          msg: `Unknown channel: ${ch}`,
          type: "value_error",
        })),
      );
    }
    await checkThreadAccess(ctx, c.get("auth"), threadId);
    const filter: EventFilter = { channels: new Set(b.channels), namespaces: b.namespaces, depth: b.depth };
    const log = await service.logs.open(threadId);

    // Pull-driven: a client that stops reading stops the follow; the log stays bounded.
    return followSse(
      c.req.raw,
      stopSignal,
      (signal) => log.follow(b.since ?? 0, signal),
      (e) => (matches(filter, e) ? sseFrame(e.method, JSON.stringify(e), e.event_id) : null),
    );
  });
}
