import assert from "node:assert/strict";
import { describe, test } from "node:test";
import {
  Annotation,
  Command,
  END,
  MemorySaver,
  START,
  StateGraph,
  type LangGraphRunnableConfig,
} from "@langchain/langgraph";
import {
  authenticateConnection,
  getAccessToken,
  type ConnectionInterrupt,
} from "../../src/connections/graph-helper.ts";
import { DIALECTS } from "../support/dialects.ts";
import { Browser } from "./support/browser.ts";
import { startMockAuthServer } from "./support/mock-oauth.ts";
import { json, startConnectionsPlatform } from "./support/platform.ts";
import { AGENT_A } from "./support/seed.ts";

for (const dialect of DIALECTS) {
  describe(`graph helper (${dialect})`, () => {
    test("a node without a connection interrupts with the OAuth URL; after the callback, resume gets the token", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      const mock = await startMockAuthServer(t);
      assert.equal(
        (await p.api("/v2/auth/providers", { method: "POST", json: mock.providerBody("mock") })).status,
        200,
      );

      let calls = 0;
      const State = Annotation.Root({ token: Annotation<string> });
      const graph = new StateGraph(State)
        .addNode("call_api", async (_state, config: LangGraphRunnableConfig) => {
          calls++;
          const token = await getAccessToken({
            provider: "mock",
            scopes: ["repo"],
            config,
            platformUrl: p.url,
            apiKey: p.apiKey,
            waitSeconds: 1,
          });
          return { token };
        })
        .addEdge(START, "call_api")
        .addEdge("call_api", END)
        .compile({ checkpointer: new MemorySaver() });
      // What the agent server passes: the assistant id is the agent id.
      const config = { configurable: { thread_id: "thread-1", assistant_id: AGENT_A } };

      let out = (await graph.invoke({}, config)) as {
        token?: string;
        __interrupt__?: Array<{ value: ConnectionInterrupt }>;
      };
      assert.equal(out.token, undefined);
      const first = out.__interrupt__![0].value;
      assert.equal(first.type, "wharf.connection_required");
      assert.equal(first.status, "pending");
      assert.ok(first.url.startsWith(`${mock.url}/authorize?`));

      // Resumed too early: the run pauses again, with the same link.
      out = (await graph.invoke(new Command({ resume: "done?" }), config)) as typeof out;
      assert.equal(out.__interrupt__![0].value.url, first.url);

      const page = await new Browser().open(first.url);
      assert.equal(page.status, 200);
      out = (await graph.invoke(new Command({ resume: "done" }), config)) as typeof out;
      assert.equal(out.token, mock.issued[0].access_token);
      assert.equal(out.__interrupt__, undefined);
      assert.ok(calls >= 3);

      // The connection belongs to the assistant; a new thread gets the token without a pause.
      assert.equal((await json(p.api(`/v2/auth/agents/${AGENT_A}/connections`))).data.length, 1);
      const again = (await graph.invoke(
        {},
        { configurable: { thread_id: "thread-2", assistant_id: AGENT_A } },
      )) as typeof out;
      assert.equal(again.token, mock.issued[0].access_token);

      // Outside a graph: the plain call.
      const plain = await authenticateConnection({
        provider: "mock",
        scopes: ["repo"],
        agentId: AGENT_A,
        platformUrl: p.url,
        apiKey: p.apiKey,
      });
      assert.equal(plain.status, "completed");
    });
  });
}
