import assert from "node:assert/strict";
import { test } from "node:test";
import { Command, MemorySaver } from "@langchain/langgraph";
import { HumanMessage } from "@langchain/core/messages";
import path from "node:path";
import { builder } from "../../examples/oauth-agent/src/agent.ts";
import type { ConnectionInterrupt } from "../../src/connections/graph-helper.ts";
import { Browser } from "./support/browser.ts";
import { startMockAuthServer } from "./support/mock-oauth.ts";
import { json, startConnectionsPlatform } from "./support/platform.ts";
import { AGENT_A } from "./support/seed.ts";
import { startTestAgentServer } from "../agent-server/support.ts";

test("examples/oauth-agent: interrupt with the URL, connect, resume, act with the token", async (t) => {
  const p = (await startConnectionsPlatform(t, "sqlite"))!;
  const mock = await startMockAuthServer(t);
  await p.api("/v2/auth/providers", { method: "POST", json: mock.providerBody("mock") });
  mock.account = { sub: "octocat-id", login: "octocat" };
  // The environment the agent server would give the graph (langgraph.json env + operator's).
  Object.assign(process.env, {
    WHARF_URL: p.url,
    WHARF_API_KEY: p.apiKey,
    OAUTH_PROVIDER: "mock",
    OAUTH_SCOPES: "read:user",
    PROVIDER_USER_URL: `${mock.url}/userinfo`,
  });

  const graph = builder.compile({ checkpointer: new MemorySaver() });
  const config = { configurable: { thread_id: "t1", assistant_id: AGENT_A } };
  const first = (await graph.invoke({ messages: [new HumanMessage("who am I?")] }, config)) as {
    __interrupt__?: Array<{ value: ConnectionInterrupt }>;
  };
  const url = first.__interrupt__![0].value.url;
  assert.equal((await new Browser().open(url)).status, 200);
  const done = (await graph.invoke(new Command({ resume: true }), config)) as { messages: Array<{ content: unknown }> };
  assert.equal(done.messages.at(-1)!.content, "On mock you are octocat.");
  assert.equal((await json(p.api(`/v2/auth/agents/${AGENT_A}/connections`))).data[0].provider_account_label, "octocat");
});

test("examples/oauth-agent on a real agent server through the SDK: interrupt carries the URL, resume acts with the token", async (t) => {
  const p = (await startConnectionsPlatform(t, "sqlite"))!;
  const mock = await startMockAuthServer(t);
  await p.api("/v2/auth/providers", { method: "POST", json: mock.providerBody("mock") });
  mock.account = { sub: "hubot-id", login: "hubot" };
  // Operator settings win over the project's langgraph.json env (which names the real GitHub).
  Object.assign(process.env, {
    WHARF_URL: p.url,
    WHARF_API_KEY: p.apiKey,
    OAUTH_PROVIDER: "mock",
    OAUTH_SCOPES: "read:user",
    PROVIDER_USER_URL: `${mock.url}/userinfo`,
  });
  const server = (await startTestAgentServer(t, {
    project: path.resolve(import.meta.dirname, "../../examples/oauth-agent"),
    open: true,
  }))!;
  const client = server.client();
  const assistant = await client.assistants.get("agent");
  const thread = await client.threads.create();

  await client.runs.wait(thread.thread_id, "agent", { input: { messages: [{ role: "human", content: "who am I?" }] } });
  const paused = await client.threads.getState(thread.thread_id);
  assert.deepEqual(paused.next, ["whoami"]);
  const interrupt = paused.tasks[0].interrupts[0].value as ConnectionInterrupt;
  assert.equal(interrupt.type, "wharf.connection_required");
  assert.equal((await new Browser().open(interrupt.url)).status, 200);

  const done = (await client.runs.wait(thread.thread_id, "agent", { command: { resume: true } })) as {
    messages: Array<{ content: unknown }>;
  };
  assert.equal(done.messages.at(-1)!.content, "On mock you are hubot.");
  const { data } = await json(p.api(`/v2/auth/agents/${assistant.assistant_id}/connections`));
  assert.equal(data.length, 1, "the connection belongs to the assistant the run used");
  assert.equal(data[0].provider_account_label, "hubot");
  // The token is used by the node and never stored in the thread's state.
  const state = JSON.stringify(await client.threads.getState(thread.thread_id));
  for (const issued of mock.issued)
    assert.ok(!state.includes(issued.access_token), "no access token in the thread state");
});
