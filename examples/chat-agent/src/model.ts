import { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { AIMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";

/**
 * A chat model that needs no network and always answers the same way, so the example runs
 * anywhere: a new question gets a call to the `whoami` tool; a tool result gets the final answer.
 * Swap it for a real model (e.g. `new ChatOpenAI()` bound to the same tools) in a real agent.
 */
export class DeterministicChatModel extends BaseChatModel {
  _llmType(): string {
    return "deterministic-demo";
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const last = messages.at(-1);
    let message: AIMessage;
    if (last instanceof ToolMessage) {
      const question = [...messages].reverse().find((m) => m.getType() === "human");
      message = new AIMessage(`You said: ${String(question?.content ?? "")}. ${String(last.content)}`);
    } else {
      const text = String(last?.content ?? "");
      message = new AIMessage({ content: "", tool_calls: [{ id: `call_whoami_${messages.length}`, name: "whoami", args: { question: text }, type: "tool_call" }] });
    }
    return { generations: [{ text: String(message.content), message }] };
  }
}
