import { AIMessage } from "@langchain/core/messages";
import { MessagesAnnotation, StateGraph } from "@langchain/langgraph";

/** The smallest useful graph: one node that echoes the last message (used by tests and benchmarks). */
export const graph = new StateGraph(MessagesAnnotation)
  .addNode("echo", (state: typeof MessagesAnnotation.State) => ({
    messages: [new AIMessage(`echo: ${String(state.messages.at(-1)?.content ?? "")}`)],
  }))
  .addEdge("__start__", "echo")
  .compile();
