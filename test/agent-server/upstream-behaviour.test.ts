import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { collect, startTestAgentServer } from "./support.ts";

// Behaviour the LangGraph JS server's own black-box suites expect (scripts/upstream-suites.sh runs
// them), each pinned here through the official SDK or raw HTTP: assistant deletion, a queued run
// cancelled before it starts, a project's routes (body edits, webhook paths, the SDK's default
// client), and what another user sees of a thread (join stream, copy).
const here = path.dirname(fileURLToPath(import.meta.url));
const ROUTES_PROJECT = path.join(here, "fixtures/routes");
const AUTH_PROJECT = path.join(here, "fixtures/auth");
const say = (text: string) => ({ messages: [{ role: "human", content: text }] });
const lastText = (values: unknown) =>
  String((values as { messages: Array<{ content: unknown }> }).messages.at(-1)?.content);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe("as the LangGraph server's own suites expect", () => {
  test("DELETE /assistants/{id} answers 200 with the id; delete_threads=true deletes the threads made for it", async (t) => {
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const client = server.client();
    const assistant = await client.assistants.create({ graphId: "echo" });
    const kept = await client.assistants.create({ graphId: "echo" });
    const mine = await client.threads.create({ metadata: { assistant_id: assistant.assistant_id } });
    await client.runs.wait(mine.thread_id, assistant.assistant_id, { input: say("hi") });
    const other = await client.threads.create({ metadata: { assistant_id: kept.assistant_id } });

    const res = await fetch(`${server.url}/assistants/${assistant.assistant_id}?delete_threads=true`, {
      method: "DELETE",
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await res.json(), [assistant.assistant_id]);
    await assert.rejects(client.assistants.get(assistant.assistant_id), /HTTP 404: Assistant not found/);
    await assert.rejects(
      client.threads.get(mine.thread_id),
      new RegExp(`HTTP 404: Thread with ID ${mine.thread_id} not found`),
    );
    assert.equal((await client.threads.get(other.thread_id)).thread_id, other.thread_id);

    // Without the flag the threads stay.
    await client.assistants.delete(kept.assistant_id);
    assert.equal((await client.threads.get(other.thread_id)).thread_id, other.thread_id);
  });

  test("a queued run cancelled before it starts leaves the thread idle, and the state can be updated", async (t) => {
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const client = server.client();
    const thread = await client.threads.create();
    const run = await client.runs.create(thread.thread_id, "echo", { input: say("later"), afterSeconds: 5 });
    assert.equal((await client.threads.get(thread.thread_id)).status, "busy");
    await assert.rejects(
      client.threads.updateState(thread.thread_id, { values: say("during"), asNode: "echo" }),
      /HTTP 409/,
    );
    await client.runs.cancel(thread.thread_id, run.run_id);
    await client.runs.join(thread.thread_id, run.run_id);
    assert.equal((await client.runs.get(thread.thread_id, run.run_id)).status, "interrupted");
    assert.equal((await client.threads.get(thread.thread_id)).status, "idle");
    await client.threads.updateState(thread.thread_id, { values: say("after"), asNode: "echo" });
    assert.equal(lastText((await client.threads.getState(thread.thread_id)).values), "after");
  });

  test("a project's routes: a middleware's body edit reaches the run, a webhook path is delivered to the project, new Client() calls this server, a dashed UI name builds and its loader escapes the caller's text", async (t) => {
    const server = await startTestAgentServer(t, { open: true, project: ROUTES_PROJECT });
    if (!server) return;
    const client = server.client({ "x-prefix": "edited" });
    const thread = await client.threads.create();
    const out = await client.runs.wait(thread.thread_id, "factory", { input: say("body") });
    assert.equal(lastText(out), "edited: body");
    const stateless = await client.runs.wait(null, "factory", { input: say("stateless") });
    assert.equal(lastText(stateless), "edited: stateless");

    await server.client().runs.wait(thread.thread_id, "echo", { input: say("hook"), webhook: "/hooks/run-done" });
    type Hook = { run_id?: string; status?: string; thread_id?: string } | null;
    const received = async (): Promise<Hook> => (await (await fetch(`${server.url}/hooks/last`)).json()) as Hook;
    let hook = await received();
    for (let i = 0; i < 50 && !hook; i++) {
      await sleep(100);
      hook = await received();
    }
    assert.equal(hook?.status, "success");
    assert.equal(hook?.thread_id, thread.thread_id);

    const self = await fetch(`${server.url}/self-call`);
    assert.equal(self.status, 200);
    assert.equal(lastText(await self.json()), "echo: from a route");

    // A UI named with a dash builds (its global is an identifier) and its loader calls it.
    const loader = await fetch(`${server.url}/ui/chat-widgets`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "Weather", shadowRootId: "root-1" }),
    });
    const html = await loader.text();
    assert.equal(loader.status, 200, html);
    assert.match(html, /onload='__LGUI_chat_widgets\.render\("Weather", "root-1"\)'/);
    assert.match(await (await fetch(`${server.url}/ui/chat-widgets/entrypoint.js`)).text(), /__LGUI_chat_widgets/);
    // Current SDKs send only the name: the root id is left as the placeholder they fill in.
    const placeholder = await fetch(`${server.url}/ui/chat-widgets`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "Weather" }),
    });
    assert.match(await placeholder.text(), /onload='__LGUI_chat_widgets\.render\("Weather", "\{\{shadowRootId\}\}"\)'/);
    // Attack: a component name that closes the onload attribute to add its own handler. It stays
    // inside the attribute (the quote is an entity), so the page gets no new attribute or element.
    const hostile = await fetch(`${server.url}/ui/chat-widgets`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ name: "x' onerror='alert(1)", shadowRootId: "r'><img src=x onerror=alert(2)>" }),
    });
    const hostileHtml = await hostile.text();
    assert.equal(hostile.status, 200);
    assert.doesNotMatch(hostileHtml, /' onerror=|'><img/);
    assert.match(
      hostileHtml,
      /render\("x&#39; onerror=&#39;alert\(1\)", "r&#39;><img src=x onerror=alert\(2\)>"\)'><\/script>$/,
    );

    // Neither a URL nor a path of this server: a 422 at the field, never a 500.
    for (const webhook of ["not a url", "//elsewhere.example/x", "relative/path"]) {
      const refused: Response = await fetch(`${server.url}/runs/wait`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ assistant_id: "echo", input: say("x"), webhook }),
      });
      assert.equal(refused.status, 422, webhook);
      assert.deepEqual(((await refused.json()) as { detail: Array<{ loc: string[] }> }).detail[0].loc, [
        "body",
        "webhook",
      ]);
    }
  });

  test("a graph factory's thread state is read and updated with the graph its assistant's config builds", async (t) => {
    const server = await startTestAgentServer(t, { open: true, project: ROUTES_PROJECT });
    if (!server) return;
    const client = server.client();
    const assistant = await client.assistants.create({
      graphId: "dynamic",
      config: { configurable: { node: "custom" } },
    });
    const thread = await client.threads.create({ graphId: "dynamic" });
    assert.equal(
      lastText(await client.runs.wait(thread.thread_id, assistant.assistant_id, { input: say("in") })),
      "from custom",
    );
    await client.threads.updateState(thread.thread_id, { values: say("update"), asNode: "custom" });
    const state = await client.threads.getState(thread.thread_id);
    assert.deepEqual(
      (state.values as { messages: Array<{ content: string }> }).messages.map((m) => m.content),
      ["in", "from custom", "update"],
    );
  });

  test("POST /internal/truncate resets an open (wharf dev) server as the suites do between tests, and exists nowhere else", async (t) => {
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const client = server.client();
    const assistant = await client.assistants.create({ graphId: "echo" });
    const thread = await client.threads.create();
    await client.runs.wait(thread.thread_id, "echo", { input: say("x") });
    await client.store.putItem(["a"], "k", { v: 1 });
    const res = await fetch(`${server.url}/internal/truncate`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ runs: true, threads: true, assistants: true, checkpointer: true, store: true }),
    });
    assert.equal(res.status, 200);
    assert.deepEqual(await client.threads.search(), []);
    const left = await client.assistants.search({ limit: 100 });
    assert.ok(!left.some((a) => a.assistant_id === assistant.assistant_id));
    assert.ok(
      left.some((a) => a.graph_id === "echo"),
      "the graphs' own assistants stay",
    );
    assert.deepEqual((await client.store.searchItems(["a"])).items, []);
    assert.equal(
      ((await client.runs.wait(null, "echo", { input: say("still serving") })) as { messages: unknown[] }).messages
        .length,
      2,
    );

    const closed = await startTestAgentServer(t, {});
    if (!closed) return;
    const refused = await fetch(`${closed.url}/internal/truncate`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": closed.apiKey ?? "" },
      body: "{}",
    });
    assert.equal(refused.status, 404);
  });

  test("another user's thread: a join stream is one error event naming 404, a copy is 409 (as for a missing thread)", async (t) => {
    const server = await startTestAgentServer(t, { project: AUTH_PROJECT });
    if (!server) return;
    const alice = server.client({ Authorization: "Bearer user-alice" });
    const bob = server.client({ Authorization: "Bearer user-bob" });
    const thread = await alice.threads.create();
    const run = await alice.runs.create(thread.thread_id, "echo", { input: say("mine") });

    const seen = await collect(bob.runs.joinStream(thread.thread_id, run.run_id));
    assert.equal(seen.length, 1);
    assert.equal(seen[0].event, "error");
    assert.match(String((seen[0].data as { message: string }).message), /404/);

    await assert.rejects(bob.threads.copy(thread.thread_id), /HTTP 409/);
    await assert.rejects(bob.threads.copy("6f1c2a64-0000-4000-8000-000000000000"), /HTTP 409/);
    const copy = await alice.threads.copy(thread.thread_id);
    assert.notEqual(copy.thread_id, thread.thread_id);
    await alice.runs.join(thread.thread_id, run.run_id);
  });
});
