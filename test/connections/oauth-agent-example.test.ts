import assert from "node:assert/strict";
import { test } from "node:test";
import { Command, MemorySaver } from "@langchain/langgraph";
import { HumanMessage } from "@langchain/core/messages";
import { builder } from "../../examples/oauth-agent/src/agent.ts";
import type { ConnectionInterrupt } from "../../src/connections/graph-helper.ts";
import { Browser } from "./support/browser.ts";
import { startMockAuthServer } from "./support/mock-oauth.ts";
import { json, startConnectionsPlatform } from "./support/platform.ts";
import { AGENT_A } from "./support/seed.ts";

test("examples/oauth-agent: interrupt with the URL, connect, resume, act with the token", async (t) => {
  const p = (await startConnectionsPlatform(t, "sqlite"))!;
  const mock = await startMockAuthServer(t);
  await p.api("/v2/auth/providers", { method: "POST", json: mock.providerBody("mock") });
  mock.account = { sub: "octocat-id", login: "octocat" };
  // The environment the agent server would give the graph (langgraph.json env + operator's).
  Object.assign(process.env, { WHARF_URL: p.url, WHARF_API_KEY: p.apiKey, OAUTH_PROVIDER: "mock", OAUTH_SCOPES: "read:user", PROVIDER_USER_URL: `${mock.url}/userinfo` });

  const graph = builder.compile({ checkpointer: new MemorySaver() });
  const config = { configurable: { thread_id: "t1", assistant_id: AGENT_A } };
  const first = (await graph.invoke({ messages: [new HumanMessage("who am I?")] }, config)) as { __interrupt__?: Array<{ value: ConnectionInterrupt }> };
  const url = first.__interrupt__![0].value.url;
  assert.equal((await new Browser().open(url)).status, 200);
  const done = (await graph.invoke(new Command({ resume: true }), config)) as { messages: Array<{ content: unknown }> };
  assert.equal(done.messages.at(-1)!.content, "On mock you are octocat.");
  assert.equal((await json(p.api(`/v2/auth/agents/${AGENT_A}/connections`))).data[0].provider_account_label, "octocat");
});
