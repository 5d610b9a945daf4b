import { AIMessage } from "@langchain/core/messages";
import { MessagesAnnotation, StateGraph, type LangGraphRunnableConfig } from "@langchain/langgraph";
// In a project outside this repository: the same module from the Wharf package.
import { getAccessToken } from "../../../src/connections/graph-helper.ts";

/**
 * Acts on the caller's behalf at an OAuth provider. The node asks Wharf for a fresh access token of
 * this agent's connection; when the agent has none yet, the run pauses with an interrupt whose
 * value carries the URL to open (`{type: "wharf.connection_required", url, auth_id, ...}`), and
 * resuming the run after connecting continues here with the token. The token never enters state.
 *
 * Needs WHARF_URL and WHARF_API_KEY in the agent server's environment.
 */
async function whoami(_state: typeof MessagesAnnotation.State, config: LangGraphRunnableConfig) {
  const provider = process.env.OAUTH_PROVIDER ?? "github";
  const token = await getAccessToken({ provider, scopes: (process.env.OAUTH_SCOPES ?? "").split(/[ ,]+/).filter(Boolean), config });
  const res = await fetch(process.env.PROVIDER_USER_URL ?? "https://api.github.com/user", {
    headers: { authorization: `Bearer ${token}`, accept: "application/json", "user-agent": "wharf-oauth-agent" },
  });
  if (!res.ok) return { messages: [new AIMessage(`${provider} answered ${res.status}.`)] };
  const me = (await res.json()) as Record<string, unknown>;
  const name = me.login ?? me.email ?? me.name ?? me.sub ?? "someone";
  return { messages: [new AIMessage(`On ${provider} you are ${String(name)}.`)] };
}

/** The uncompiled graph, for tests that bring their own checkpointer. */
export const builder = new StateGraph(MessagesAnnotation).addNode("whoami", whoami).addEdge("__start__", "whoami");

// The agent server attaches its checkpointer; interrupts need one.
export const graph = builder.compile();
