import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { startTestAgentServer } from "./support.ts";

const AUTH_PROJECT = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/auth");
const hi = { messages: [{ role: "human", content: "hi" }] };

test("custom auth: default export, $contains filters, false → 403, studio users, handler bugs, what graphs see", async (t) => {
  const server = await startTestAgentServer(t, { project: AUTH_PROJECT });
  if (!server) return;
  const as = (token: string) => server.client({ Authorization: `Bearer ${token}` });

  // false → 403; the admin may.
  await assert.rejects(as("user-ann").assistants.create({ graphId: "echo" }), /HTTP 403/);
  const created = await as("user-admin").assistants.create({ graphId: "echo", name: "shared" });
  assert.equal(created.name, "shared");

  // $contains: a thread shared with bob (members) is visible to both, not to carl.
  const shared = await as("user-ann").threads.create({ metadata: { members: ["bob"] } });
  assert.deepEqual(shared.metadata?.members, ["ann", "bob"]);
  assert.equal((await as("user-bob").threads.get(shared.thread_id)).thread_id, shared.thread_id);
  await assert.rejects(as("user-carl").threads.get(shared.thread_id), /HTTP 404/);
  assert.equal((await as("user-carl").threads.search()).length, 0);
  assert.equal(await as("user-bob").threads.count(), 1);
  await assert.rejects(as("user-carl").threads.update(shared.thread_id, { metadata: { x: 1 } }), /HTTP 404/);
  await assert.rejects(as("user-carl").threads.delete(shared.thread_id), /HTTP 404/);

  // The graph's config carries the user under the interface's key and LangGraph's keys.
  const th = await as("user-bob").threads.create();
  await as("user-bob").runs.wait(th.thread_id, "echo", { input: hi, config: { configurable: { extra: 1 } } });
  const history = await as("user-bob").threads.getHistory(th.thread_id, { limit: 1 });
  assert.equal(history.length, 1);
  const seen = (await as("user-admin")
    .runs.wait(null, "whoami", { input: hi })
    .then((v) => JSON.parse((v as { messages: Array<{ content: string }> }).messages[1].content))) as Record<
    string,
    unknown
  >;
  assert.deepEqual(seen, { service: "admin", id: "admin", perms: ["admin"], team: "blue", apiKey: null });
  const viaHeader = await fetch(`${server.url}/runs/wait`, {
    method: "POST",
    headers: { authorization: "Bearer user-bob", "x-trace": "t-1", "x-api-key": "k" },
    body: JSON.stringify({ assistant_id: "whoami", input: hi }),
  });
  const seenHeader = JSON.parse(
    ((await viaHeader.json()) as { messages: Array<{ content: string }> }).messages[1].content,
  );
  assert.equal(seenHeader.header, "t-1");
  assert.equal(seenHeader.apiKey, null);
  // A string identity is accepted too.
  assert.equal((await as("plain").assistants.search()).length, 3);

  // A handler that throws something other than HTTPException is a 401 (and logged), never a 500.
  const broken = await fetch(`${server.url}/threads/search`, {
    method: "POST",
    headers: { authorization: "Bearer broken" },
    body: "{}",
  });
  assert.equal(broken.status, 401);
  const unknown = await fetch(`${server.url}/threads/search`, { method: "POST", body: "{}" });
  assert.equal(unknown.status, 401);
  assert.equal(await unknown.text(), "Unknown token (none)");

  // Studio: only with a valid platform API key; then the handlers see the Studio user (empty filter).
  const studioNoKey = await fetch(`${server.url}/threads/search`, {
    method: "POST",
    headers: { "x-auth-scheme": "langsmith" },
    body: "{}",
  });
  assert.equal(studioNoKey.status, 401);
  const studio = await fetch(`${server.url}/threads/search`, {
    method: "POST",
    headers: { "x-auth-scheme": "langsmith", "x-api-key": server.apiKey! },
    body: "{}",
  });
  assert.equal(studio.status, 200);
  assert.equal(((await studio.json()) as unknown[]).length, 2);
});
