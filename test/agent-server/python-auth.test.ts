import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { hasHandler, pathAndQuery } from "../../src/agent-server/python/python-auth.ts";
import { pythonAvailable, requireCapability, TEST_PYTHON_ENVS } from "../support/requirements.ts";
import { startTestAgentServer } from "./support.ts";

process.env.WHARF_PYTHON_ENVS = TEST_PYTHON_ENVS;
const PROJECT = path.resolve(import.meta.dirname, "fixtures/python-auth");

test("hasHandler: the LangGraph server's dispatch keys", () => {
  const cases: Array<[string[], string, boolean]> = [
    [["threads:create"], "threads:create", true],
    [["threads:create"], "threads:read", false],
    [["threads:*"], "threads:read", true],
    [["*:read"], "assistants:read", true],
    [["*:*"], "store:put", true],
    [[], "threads:read", false],
  ];
  for (const [handlers, event, want] of cases)
    assert.equal(hasHandler(handlers, event as never), want, `${handlers} ${event}`);
});

test("pathAndQuery: what the URL parser gives for a request's URL", () => {
  for (const url of [
    "http://127.0.0.1:1234/assistants/search",
    "http://h/a/b?x=1&y=%20",
    "http://h",
    "http://h/a?",
    "http://h/a#f",
    "http://h/a?q#f",
    "http://h/a/../b?c/d?e",
    "http://h/é?ü",
    "http://h:8/p%2Fq?z",
    "http://[::1]:9/x?y",
  ]) {
    const href = new Request(url).url;
    const parsed = new URL(href);
    assert.deepEqual(pathAndQuery(href), { path: parsed.pathname, query: parsed.search.slice(1) }, url);
  }
});

test("Python custom auth: authenticate with injected parameters and every return form, on-handlers with filters, denials and mutations, the user in graphs", async (t) => {
  if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python projects")) return;
  const server = await startTestAgentServer(t, { project: PROJECT });
  if (!server) return;
  const as = (headers: Record<string, string>) =>
    new Client({ apiUrl: server.url, apiKey: null, defaultHeaders: headers, callerOptions: { maxRetries: 0 } });
  const alice = as({ Authorization: "Bearer tok-alice", "x-foo": "bar" });
  const bob = as({ Authorization: "Bearer tok-bob" });
  const carol = as({ "x-api-key": "key-carol" });

  // HTTPException(401, detail, headers): status, detail and header kept (not turned into 403).
  const denied = await fetch(`${server.url}/threads`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer nope" },
    body: "{}",
  });
  assert.equal(denied.status, 401);
  assert.equal(denied.headers.get("www-authenticate"), 'Bearer realm="wharf"');
  // Errors as the Python server answers them: FastAPI's {"detail": …}.
  assert.deepEqual(await denied.json(), { detail: "Invalid token" });
  // Any status a handler raises; query_params injected as Starlette's QueryParams.
  const teapot = await fetch(`${server.url}/assistants/search?refuse=teapot`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: "Bearer tok-alice" },
    body: "{}",
  });
  assert.equal(teapot.status, 418);
  assert.deepEqual(await teapot.json(), { detail: "no coffee here" });

  // threads.create stamps the owner; threads.read filters by it (another user → 404).
  const ta = await alice.threads.create();
  assert.equal(ta.metadata?.owner, "alice");
  const tb = await bob.threads.create();
  assert.equal(tb.metadata?.owner, "bob");
  await assert.rejects(bob.threads.get(ta.thread_id), /404/);
  assert.deepEqual(
    (await alice.threads.search()).map((x) => x.thread_id),
    [ta.thread_id],
  );
  await assert.rejects(bob.runs.wait(ta.thread_id, "whoami", { input: {} }), /404/);

  // The user in the graph: attribute and item access, runtime.server_info.user, service_auth_user, headers.
  const out = (await alice.runs.wait(ta.thread_id, "whoami", { input: {} })) as { who: Record<string, unknown> };
  // auth.cache (by Authorization): alice's first request ran the handler; every later one reused it.
  assert.equal(typeof out.who.authenticate_call, "number");
  const { authenticate_call: firstCall, ...who } = out.who;
  const again = (await alice.runs.wait(null, "whoami", { input: {} })) as { who: Record<string, unknown> };
  assert.equal(again.who.authenticate_call, firstCall);
  assert.deepEqual(who, {
    identity_attr: "alice",
    identity_item: "alice",
    token: "tok-alice",
    permissions: ["read", "write"],
    server_info_user: "alice",
    service_auth_user: "alice",
    x_foo: "bar",
    has_authorization: false,
  });
  // (permissions, user) tuples and plain strings.
  const b = (await bob.runs.wait(null, "whoami", { input: {} })) as { who: Record<string, unknown> };
  assert.deepEqual([b.who.identity_attr, b.who.permissions], ["bob", ["read"]]);
  const c = (await carol.runs.wait(null, "whoami", { input: {} })) as { who: Record<string, unknown> };
  assert.deepEqual([c.who.identity_attr, c.who.permissions], ["carol", []]);

  // False → 403; an assert → 403 with its text.
  const [assistant] = await alice.assistants.search();
  await assert.rejects(alice.assistants.delete(assistant.assistant_id), /403/);
  const upd = await fetch(`${server.url}/assistants/${assistant.assistant_id}`, {
    method: "PATCH",
    headers: { "content-type": "application/json", authorization: "Bearer tok-alice" },
    body: JSON.stringify({ metadata: { a: 1 } }),
  });
  assert.equal(upd.status, 403);
  assert.deepEqual(await upd.json(), { detail: "assistants are read-only here" });

  // @auth.on.store rewrites the namespace: each user's items live under their identity.
  await alice.store.putItem(["notes"], "k", { text: "alice's" });
  await bob.store.putItem(["notes"], "k", { text: "bob's" });
  assert.deepEqual((await alice.store.getItem(["notes"], "k"))?.value, { text: "alice's" });
  assert.deepEqual((await bob.store.getItem(["notes"], "k"))?.value, { text: "bob's" });
  const found = await alice.store.searchItems(["notes"]);
  assert.deepEqual(
    found.items.map((i) => i.namespace),
    [["alice", "notes"]],
  );

  // Studio: a StudioUser by isinstance and is_studio_user (wharf dev is open: no platform key needed... here a key is).
  const studio = await fetch(`${server.url}/threads`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-auth-scheme": "langsmith", "x-api-key": server.apiKey! },
    body: "{}",
  });
  assert.equal(studio.status, 200);
  const st = (await studio.json()) as { metadata: Record<string, unknown> };
  assert.deepEqual([st.metadata.owner, st.metadata.studio], ["langgraph-studio-user", true]);
});
