import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DIALECTS } from "../support/dialects.ts";
import { CHAT_EXAMPLE, collect, startTestAgentServer } from "./support.ts";

const hi = { messages: [{ role: "human", content: "hi" }] };
const AI_FIELDS = [
  "additional_kwargs",
  "content",
  "example",
  "id",
  "invalid_tool_calls",
  "name",
  "response_metadata",
  "tool_calls",
  "type",
  "usage_metadata",
];
const HUMAN_FIELDS = ["additional_kwargs", "content", "example", "id", "name", "response_metadata", "type"];

for (const dialect of DIALECTS) {
  describe(`agent server with the official SDK client, example chat agent (${dialect})`, () => {
    test("stateless stream, wait, assistants, threads, custom auth isolation and 401", async (t) => {
      const server = await startTestAgentServer(t, { dialect, project: CHAT_EXAMPLE });
      if (!server) return;
      const alice = server.client({ Authorization: "Bearer demo-token-alice" });
      const bob = server.client({ Authorization: "Bearer demo-token-bob" });

      // runs.stream(null, …, updates): the metadata chunk first (a printing client skips it), then updates.
      const chunks = await collect(alice.runs.stream(null, "agent", { input: hi, streamMode: "updates" }));
      assert.equal(chunks[0].event, "metadata");
      assert.match((chunks[0].data as { run_id: string }).run_id, /^[0-9a-f-]{36}$/);
      assert.equal((chunks[0].data as unknown as { attempt: number }).attempt, 1);
      const updates = chunks.slice(1);
      assert.ok(updates.length >= 1 && updates.every((c) => c.event === "updates"));
      assert.deepEqual(Object.keys(updates[0].data as object), ["agent"]);
      const printed = chunks.filter((c) => !(c.data && typeof c.data === "object" && "run_id" in c.data));
      assert.equal(printed.length, updates.length);

      // runs.wait: the final state, input message first, each message with every field.
      const result = (await alice.runs.wait(null, "agent", { input: hi })) as {
        messages: Array<Record<string, unknown>>;
      };
      assert.equal(result.messages[0].content, "hi");
      assert.equal(result.messages[0].type, "human");
      assert.deepEqual(Object.keys(result.messages[0]).sort(), HUMAN_FIELDS);
      const last = result.messages.at(-1)!;
      assert.equal(last.type, "ai");
      for (const f of AI_FIELDS) assert.ok(f in last, `AI message lacks ${f}`);
      assert.equal(last.name, null);
      assert.equal(last.example, false);
      assert.equal(last.usage_metadata, null);
      // The node read the per-user token from configurable.service_auth_user (only its last 4 characters).
      assert.match(String(last.content), /alice.*4f1a/);
      assert.doesNotMatch(JSON.stringify(result), /svc-alice-4f1a/);

      // assistants.search({limit, offset}): the default assistant of the graph, with graph_id and config.
      const assistants = await alice.assistants.search({ limit: 10, offset: 0 });
      assert.equal(assistants.length, 1);
      assert.equal(assistants[0].graph_id, "agent");
      assert.deepEqual(assistants[0].config, {});
      assert.equal(assistants[0].assistant_id, "fe096781-5601-53d2-b2f6-0d3403f7e9ca");
      assert.deepEqual(await alice.assistants.search({ limit: 10, offset: 1 }), []);

      // threads.create / threads.search under custom auth: each user sees only their threads.
      const ta = await alice.threads.create();
      assert.equal(ta.metadata?.owner, "alice");
      assert.equal(ta.status, "idle");
      const tb = await bob.threads.create({ metadata: { topic: "b" } });
      assert.deepEqual(
        (await alice.threads.search()).map((x) => x.thread_id),
        [ta.thread_id],
      );
      assert.deepEqual(
        (await bob.threads.search()).map((x) => x.thread_id),
        [tb.thread_id],
      );
      await assert.rejects(bob.threads.get(ta.thread_id), /HTTP 404/);
      await assert.rejects(bob.runs.wait(ta.thread_id, "agent", { input: hi }), /HTTP 404/);
      // Joining another user's run: the stream's error event (as the LangGraph server), not an HTTP error.
      const tc = await alice.threads.create();
      const aliceRun = await alice.runs.create(tc.thread_id, "agent", { input: hi });
      const joined = await collect(bob.runs.joinStream(tc.thread_id, aliceRun.run_id));
      assert.deepEqual(
        joined.map((e) => e.event),
        ["error"],
      );
      assert.match(String((joined[0].data as { message: string }).message), /not found/);
      await alice.runs.join(tc.thread_id, aliceRun.run_id);
      await alice.threads.delete(tc.thread_id);
      // GET /threads (the interface's listing for the bearer flow).
      const listed = await fetch(`${server.url}/threads`, { headers: { Authorization: "Bearer demo-token-bob" } });
      assert.equal(listed.status, 200);
      assert.deepEqual(
        ((await listed.json()) as Array<{ thread_id: string }>).map((x) => x.thread_id),
        [tb.thread_id],
      );

      // A bad token: 401 with the handler's message.
      await assert.rejects(
        server.client({ Authorization: "Bearer nope" }).threads.search(),
        (err: Error & { status?: number }) => {
          assert.equal(err.status, 401);
          assert.match(err.message, /Invalid token/);
          return true;
        },
      );
      const noHeader = await fetch(`${server.url}/assistants/search`, { method: "POST", body: "{}" });
      assert.equal(noHeader.status, 401);
      assert.equal(await noHeader.text(), "Missing bearer token");
      assert.equal(noHeader.headers.get("www-authenticate"), "Bearer");

      // A thread run keeps state: two turns, the state has both.
      await alice.runs.wait(ta.thread_id, "agent", { input: hi });
      const second = (await alice.runs.wait(ta.thread_id, "agent", {
        input: { messages: [{ role: "human", content: "again" }] },
      })) as { messages: unknown[] };
      assert.equal(second.messages.length, 8);
      const state = await alice.threads.getState(ta.thread_id);
      assert.equal((state.values as { messages: unknown[] }).messages.length, 8);
      assert.deepEqual(state.next, []);
      const thread = await alice.threads.get(ta.thread_id);
      assert.equal(thread.status, "idle");
      assert.equal(thread.metadata?.graph_id, "agent");
      const runs = await alice.runs.list(ta.thread_id);
      assert.deepEqual(
        runs.map((r) => r.status),
        ["success", "success"],
      );
    });
  });
}
