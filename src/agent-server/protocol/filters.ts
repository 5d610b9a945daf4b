import { inferChannel, isPrefixMatch, isSupportedChannel } from "@langchain/langgraph/stream";
import { z } from "zod";
import type { ProtocolEvent } from "./events.ts";

/** Which events one consumer receives: an SSE connection's body, or a WebSocket subscription. */
export interface EventFilter {
  channels: Set<string>;
  namespaces?: string[][];
  depth?: number;
}

const namespaces = z.array(z.array(z.string()));

/** The body of `POST /threads/{id}/stream/events` (unknown keys are refused, as by the reference server). */
export const eventsBody = z.strictObject({
  channels: z.array(z.string()).min(1),
  namespaces: namespaces.optional(),
  depth: z.number().int().nonnegative().optional(),
  since: z.number().int().nonnegative().optional(),
});

/** The channels a filter names that the protocol does not know (`custom:<name>` is known). */
export function unknownChannels(channels: Iterable<string>): string[] {
  return [...channels].filter((c) => !isSupportedChannel(c));
}

/**
 * Whether an event reaches a consumer: its channel named (a bare `custom` takes every named
 * custom channel), and under one of the namespace prefixes within `depth` levels when given.
 */
export function matches(filter: EventFilter, event: ProtocolEvent): boolean {
  const channel = inferChannel(event);
  if (channel == null) return false;
  if (!filter.channels.has(channel) && !(channel.startsWith("custom:") && filter.channels.has("custom"))) return false;
  if (!filter.namespaces?.length) return true;
  return filter.namespaces.some(
    (prefix) =>
      isPrefixMatch(event.params.namespace, prefix) &&
      (filter.depth == null || event.params.namespace.length - prefix.length <= filter.depth),
  );
}
