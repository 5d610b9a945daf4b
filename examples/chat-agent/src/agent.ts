import type { RunnableConfig } from "@langchain/core/runnables";
import { tool } from "@langchain/core/tools";
import { MessagesAnnotation, StateGraph } from "@langchain/langgraph";
import { ToolNode } from "@langchain/langgraph/prebuilt";
import { z } from "zod";
import { DeterministicChatModel } from "./model.ts";

/**
 * A tool that acts for the caller: it reads the per-user token the auth handler attached
 * (`config.configurable.service_auth_user`) without ever putting it into the graph's state.
 */
const whoami = tool(
  async (_input: { question: string }, config: RunnableConfig) => {
    const user = config.configurable?.service_auth_user as { identity?: string; api_token?: string } | undefined;
    if (!user?.identity) return "I do not know who you are (no authenticated user).";
    const token = user.api_token ? `a token ending in ${user.api_token.slice(-4)}` : "no token";
    return `${process.env.CHAT_AGENT_GREETING ?? "Hello"} ${user.identity}, I acted for you with ${token}.`;
  },
  { name: "whoami", description: "Says who the caller is, using their own credentials.", schema: z.object({ question: z.string() }) },
);

// A real model would be `.bindTools([whoami])`; the deterministic one already knows its tool.
const model = new DeterministicChatModel({});

async function callModel(state: typeof MessagesAnnotation.State) {
  return { messages: [await model.invoke(state.messages)] };
}

function next(state: typeof MessagesAnnotation.State) {
  const last = state.messages.at(-1) as { tool_calls?: unknown[] } | undefined;
  return last?.tool_calls?.length ? "tools" : "__end__";
}

export const graph = new StateGraph(MessagesAnnotation)
  .addNode("agent", callModel)
  .addNode("tools", new ToolNode([whoami]))
  .addEdge("__start__", "agent")
  .addConditionalEdges("agent", next, ["tools", "__end__"])
  .addEdge("tools", "agent")
  .compile();
