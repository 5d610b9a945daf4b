import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { DIALECTS } from "../support/dialects.ts";
import { startTestAgentServer } from "./support.ts";

const STORE_PROJECT = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/store");

for (const dialect of DIALECTS) {
  test(`store API (${dialect}): SDK put/get/search/list/delete, filters, namespaces, auth handlers, graphs' store`, async (t) => {
    const server = await startTestAgentServer(t, { dialect, project: STORE_PROJECT });
    if (!server) return;
    const alice = server.client({ Authorization: "Bearer user-alice" }).store;
    const bob = server.client({ Authorization: "Bearer user-bob" }).store;

    // put / get: the handler confines alice to ["alice", ...] and stamps the owner into the value.
    await alice.putItem(["docs", "a"], "k1", { title: "one", n: 1 });
    await alice.putItem(["docs", "a"], "k2", { title: "two", n: 2, tags: ["x", "y"] });
    await alice.putItem(["docs", "b"], "k3", { title: "three", n: 3 });
    // Written by a graph (no `owner` stamped): the handler's returned search filter is not applied.
    await server.server.ctx.store.put(["alice", "graph-notes"], "g1", { text: "from a graph" });
    assert.deepEqual(
      (await alice.searchItems(["graph-notes"])).items.map((i) => i.key),
      ["g1"],
    );
    await server.server.ctx.store.delete(["alice", "graph-notes"], "g1");
    await alice.putItem(["notes"], "k4", { title: "four", n: 4 });
    const got = await alice.getItem(["docs", "a"], "k1");
    assert.deepEqual(got?.namespace, ["alice", "docs", "a"]);
    assert.equal(got?.key, "k1");
    assert.deepEqual(got?.value, { title: "one", n: 1, owner: "alice" });
    assert.match(String((got as unknown as Record<string, unknown>).created_at), /^\d{4}-\d\d-\d\dT/);
    assert.equal(got?.createdAt, (got as unknown as Record<string, unknown>).created_at);
    assert.equal(await bob.getItem(["docs", "a"], "k1"), null, "bob reads his own namespace");

    // An update keeps created_at and moves updated_at; the newest item comes first in a search.
    await new Promise((r) => setTimeout(r, 5));
    await alice.putItem(["docs", "a"], "k1", { title: "one again", n: 1 });
    const updated = await alice.getItem(["docs", "a"], "k1");
    assert.equal(updated?.createdAt, got?.createdAt);
    assert.ok(updated!.updatedAt > got!.updatedAt);

    // search: namespace prefix (label-wise, not string-wise), filters, limit/offset, query ignored.
    const docs = await alice.searchItems(["docs"]);
    assert.deepEqual(
      docs.items.map((i) => i.key),
      ["k1", "k3", "k2"],
    );
    assert.deepEqual(
      (await alice.searchItems(["docs", "a"], { limit: 1, offset: 1 })).items.map((i) => i.key),
      ["k2"],
    );
    assert.deepEqual((await alice.searchItems(["doc"])).items, []);
    assert.deepEqual(
      (await alice.searchItems([], { filter: { title: "four" } })).items.map((i) => i.key),
      ["k4"],
    );
    assert.deepEqual(
      (await alice.searchItems([], { filter: { n: { $gte: 2, $lt: 4 } } })).items.map((i) => i.key).sort(),
      ["k2", "k3"],
    );
    assert.deepEqual(
      (await alice.searchItems([], { filter: { tags: ["x", "y"] } })).items.map((i) => i.key),
      ["k2"],
    );
    assert.deepEqual(
      (await alice.searchItems([], { filter: { n: { $in: [1, 4] } }, limit: 1, offset: 1 })).items.map((i) => i.key),
      ["k4"],
    );
    assert.equal((await alice.searchItems(["docs"], { query: "anything" })).items.length, 3);
    assert.deepEqual((await bob.searchItems([])).items, []);

    // list namespaces: prefix, suffix (with a wildcard), max_depth, limit/offset.
    assert.deepEqual((await alice.listNamespaces()).namespaces, [
      ["alice", "docs", "a"],
      ["alice", "docs", "b"],
      ["alice", "notes"],
    ]);
    assert.deepEqual((await alice.listNamespaces({ prefix: ["docs"] })).namespaces, [
      ["alice", "docs", "a"],
      ["alice", "docs", "b"],
    ]);
    assert.deepEqual((await alice.listNamespaces({ suffix: ["b"] })).namespaces, [["alice", "docs", "b"]]);
    assert.deepEqual((await alice.listNamespaces({ prefix: ["*"], maxDepth: 2 })).namespaces, [
      ["alice", "docs"],
      ["alice", "notes"],
    ]);
    assert.deepEqual((await alice.listNamespaces({ limit: 1, offset: 2 })).namespaces, [["alice", "notes"]]);

    // delete; a handler returning false is a 403; bad namespaces and bodies are 422, never a 500.
    await alice.deleteItem(["notes"], "k4");
    assert.equal(await alice.getItem(["notes"], "k4"), null);
    const reader = server.client({ Authorization: "Bearer user-reader" }).store;
    await assert.rejects(reader.putItem(["x"], "k", { a: 1 }), /HTTP 403/);
    await assert.rejects(reader.deleteItem(["x"], "k"), /HTTP 403/);
    const raw = (method: string, p: string, body?: unknown) =>
      fetch(`${server.url}${p}`, {
        method,
        headers: { authorization: "Bearer user-alice", "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    assert.equal((await raw("PUT", "/store/items", { namespace: ["a", ""], key: "k", value: {} })).status, 422);
    assert.equal((await raw("PUT", "/store/items", { namespace: ["a:b"], key: "k", value: {} })).status, 422);
    assert.equal((await raw("POST", "/store/namespaces", { prefix: ["a.b"] })).status, 422);
    assert.equal((await raw("PUT", "/store/items", { namespace: ["a"], key: "k", value: "text" })).status, 422);
    assert.equal((await raw("PUT", "/store/items", { namespace: ["a"], value: {} })).status, 422);
    assert.equal((await raw("POST", "/store/items/search", { namespace_prefix: ["a"], limit: 0 })).status, 422);
    assert.equal((await raw("GET", "/store/items?namespace=docs.a")).status, 422);
    assert.equal(await (await raw("GET", "/store/items?namespace=docs.nothing&key=k")).text(), "null");
    assert.equal((await fetch(`${server.url}/store/items/search`, { method: "POST", body: "{}" })).status, 401);

    // Graphs see the same store (config.store and getStore()) across threads and runs.
    const client = server.client({ Authorization: "Bearer user-carol" });
    await client.runs.wait(null, "memory", { input: { messages: [{ role: "human", content: "tea" }] } });
    const thread = await client.threads.create();
    const out = (await client.runs.wait(thread.thread_id, "memory", {
      input: { messages: [{ role: "human", content: "cake" }] },
    })) as { messages: Array<{ content: string }> };
    assert.equal(out.messages.at(-1)?.content, "cake,tea");
    const carol = client.store;
    assert.deepEqual((await carol.searchItems(["memories"])).items.map((i) => i.value.text).sort(), ["cake", "tea"]);
    assert.deepEqual((await carol.getItem(["memories"], "m-tea"))?.value, { text: "tea", owner: "carol" });
  });
}

test("store API without custom auth: API key required, namespaces as given", async (t) => {
  const server = await startTestAgentServer(t, {});
  if (!server) return;
  const store = server.client().store;
  await store.putItem(["prefs", "u1"], "theme", { dark: true });
  assert.deepEqual((await store.getItem(["prefs", "u1"], "theme"))?.namespace, ["prefs", "u1"]);
  assert.deepEqual((await store.listNamespaces({ prefix: ["prefs"] })).namespaces, [["prefs", "u1"]]);
  assert.equal((await fetch(`${server.url}/store/items?namespace=prefs.u1&key=theme`)).status, 401);
  const reserved = await fetch(`${server.url}/store/items`, {
    method: "PUT",
    headers: { "x-api-key": server.apiKey!, "content-type": "application/json" },
    body: JSON.stringify({ namespace: ["langgraph", "x"], key: "k", value: {} }),
  });
  assert.equal(reserved.status, 422);
});
