import { isBaseMessage, type BaseMessage } from "@langchain/core/messages";
import { isMessageChunk } from "../wire.ts";
import type { RunChannel } from "./run-channel.ts";
import type { RunKwargs } from "./runs.ts";
import { serverChunk } from "./debug-events.ts";

/**
 * A run's LangGraph stream chunks published to its channel under the event names of the LangGraph
 * server; the root namespace's last `values` (or the interrupt it paused on) kept for the outcome.
 */
export class ServerEvents {
  lastValues: unknown = undefined;
  interrupt: unknown = undefined;
  private readonly userModes: string[];
  private readonly wantTuple: boolean;
  private readonly wantLegacy: boolean;
  private readonly subgraphs: boolean;
  private readonly seenIds = new Set<string>();
  private readonly partial = new Map<string, BaseMessage>();

  constructor(
    kwargs: RunKwargs,
    private readonly channel: RunChannel,
  ) {
    this.userModes = kwargs.stream_mode;
    this.wantTuple = this.userModes.includes("messages-tuple");
    this.wantLegacy = this.userModes.includes("messages");
    this.subgraphs = kwargs.subgraphs;
  }

  /** A `values` chunk of the root namespace: the run's result so far, or the interrupt it paused on. */
  topValues(data: unknown): void {
    if (data && typeof data === "object" && "__interrupt__" in data && Object.keys(data).length === 1)
      this.interrupt = (data as Record<string, unknown>).__interrupt__;
    else this.lastValues = data;
  }

  emit(mode: string, ns: string[] | null, data: unknown): void {
    const topLevel = !ns || ns.length === 0;
    const name = (base: string) => (this.subgraphs && !topLevel ? `${base}|${ns!.join("|")}` : base);
    if (mode === "values" && topLevel) this.topValues(data);
    if (mode === "messages") {
      if (this.wantTuple) this.channel.push(name("messages"), data);
      if (this.wantLegacy) this.legacyMessage(data as [BaseMessage, unknown]);
      return;
    }
    // The mode's own event first, then (legacy `messages`) the completed messages of a values
    // chunk, in the LangGraph server's order.
    if (this.userModes.includes(mode)) this.channel.push(name(mode), serverChunk(mode, data));
    if (mode === "values" && this.wantLegacy && (this.subgraphs || topLevel)) this.completeMessages(data);
  }

  /** Legacy `messages`: metadata once per message id, then each chunk as the whole message so far. */
  private legacyMessage([msg, meta]: [BaseMessage, unknown]): void {
    if (!isMessageChunk(msg) || !msg.id) return;
    const prev = this.partial.get(msg.id);
    if (!prev) this.channel.push("messages/metadata", { [msg.id]: { metadata: meta } });
    const merged = prev ? (prev as ReturnType<typeof msg.concat>).concat(msg) : msg;
    this.partial.set(msg.id, merged);
    this.channel.push("messages/partial", [merged]);
  }

  /** Legacy `messages`: a values chunk's messages not seen before, as `messages/complete`. */
  private completeMessages(data: unknown): void {
    const msgs =
      data && typeof data === "object" && "messages" in data ? (data as { messages: unknown }).messages : undefined;
    const fresh = (Array.isArray(msgs) ? msgs : msgs ? [msgs] : []).filter(
      (m) => isBaseMessage(m) && m.id && !this.seenIds.has(m.id),
    ) as BaseMessage[];
    for (const m of fresh) this.seenIds.add(m.id!);
    if (fresh.length) this.channel.push("messages/complete", fresh);
  }
}
