import assert from "node:assert/strict";
import { until } from "../support/wait.ts";
import path from "node:path";
import { test, type TestContext } from "node:test";
import { sql } from "kysely";
import { runPythonClient, sdkPython } from "../support/python-client.ts";
import { pythonAvailable, requireCapability, TEST_PYTHON_ENVS } from "../support/requirements.ts";
import { loopbackHooks, startTestAgentServer, webhookSink, type TestAgentServer } from "./support.ts";

process.env.WHARF_PYTHON_ENVS = TEST_PYTHON_ENVS;
const PROJECT = path.resolve(import.meta.dirname, "fixtures/python-runtime");
const hi = { messages: [{ role: "human", content: "hi" }] };

async function start(
  t: TestContext,
  opts: { dialect?: "sqlite" | "postgres"; project?: string; env?: Record<string, string | undefined> } = {},
): Promise<TestAgentServer | null> {
  if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python graphs"))
    return null;
  // Settings and the project's env are read at start; each test sets what it needs.
  for (const k of ["WHARF_PYTHON_WORKERS", "PYRT_GREETING", "WHARF_CRON_TICK_MS"]) delete process.env[k];
  Object.assign(process.env, opts.env ?? {});
  return startTestAgentServer(t, {
    dialect: opts.dialect ?? "sqlite",
    project: opts.project ?? PROJECT,
    webhookGate: loopbackHooks,
  });
}

test("on PostgreSQL: the official PostgreSQL saver in the server's schema (state, history, resume, restart, copy, checkpointer.ttl); Python embeddings; crons and webhooks; a JS graph beside", async (t) => {
  const server = await start(t, { dialect: "postgres" });
  if (!server) return;
  const client = server.client();
  assert.equal(server.server.ctx.python!.hello!.versions.checkpointer, "AsyncPostgresSaver");
  let current = server;
  const rows = async (threadId: string) =>
    Number(
      (
        await sql<{ n: string }>`SELECT count(*) AS n FROM checkpoints WHERE thread_id = ${threadId}`.execute(
          current.server.ctx.db,
        )
      ).rows[0].n,
    );

  const thread = await client.threads.create();
  const first = (await client.runs.wait(thread.thread_id, "counter", { input: { total: 0 } })) as Record<string, any>;
  assert.deepEqual(
    first.__interrupt__.map((i: { value: unknown }) => i.value),
    [{ total: 1 }],
  );
  assert.equal((await client.threads.get(thread.thread_id)).status, "interrupted");
  // The checkpoints are rows of the server's own schema, written by the Python saver.
  assert.ok((await rows(thread.thread_id)) >= 2);
  const types = (
    await sql<{
      type: string;
    }>`SELECT DISTINCT type FROM checkpoint_blobs WHERE thread_id = ${thread.thread_id}`.execute(server.server.ctx.db)
  ).rows.map((r) => r.type);
  assert.ok(types.includes("msgpack"), `blob types ${types}`);

  // A restarted server (a new worker) resumes the thread from PostgreSQL.
  const again = await server.restart();
  current = again;
  const c2 = again.client();
  assert.deepEqual((await c2.threads.getState(thread.thread_id)).next, ["confirm"]);
  const resumed = (await c2.runs.wait(thread.thread_id, "counter", { command: { resume: "yes" } })) as Record<
    string,
    unknown
  >;
  assert.deepEqual(resumed, { total: 1, note: "confirmed yes" });
  const history = await c2.threads.getHistory(thread.thread_id, { limit: 10 });
  assert.ok(history.length >= 4);
  assert.deepEqual(history[0].values, { total: 1, note: "confirmed yes" });
  const copy = await c2.threads.copy(thread.thread_id);
  assert.deepEqual((await c2.threads.getState(copy.thread_id)).values, { total: 1, note: "confirmed yes" });

  // A JavaScript graph's thread beside, in the same tables.
  const jsThread = await c2.threads.create();
  assert.equal(
    ((await c2.runs.wait(jsThread.thread_id, "js_echo", { input: hi })) as { messages: unknown[] }).messages.length,
    2,
  );
  assert.equal(((await c2.threads.getState(jsThread.thread_id)).values as { messages: unknown[] }).messages.length, 2);

  // checkpointer.ttl: idle threads past the TTL go, with their Python checkpoints.
  const swept = await again.server.sweeper.sweepThreads(Date.now() + 2 * 3600_000);
  assert.ok(swept >= 3, `swept ${swept}`);
  assert.equal(await rows(thread.thread_id), 0);
  assert.equal(await rows(copy.thread_id), 0);
  await assert.rejects(c2.threads.get(thread.thread_id), /404/);

  // store.index with a Python embed function: the API and a Python node rank by it.
  await c2.store.putItem(["notes"], "cats", { text: "cat cat naps" });
  await c2.store.putItem(["notes"], "sea", { text: "sea sun waves" });
  await c2.store.putItem(["notes"], "dogs", { text: "dog walks" });
  const found = await c2.store.searchItems(["notes"], { query: "a cat", limit: 3 });
  assert.equal(found.items[0].key, "cats");
  assert.ok(typeof (found.items[0] as { score?: number }).score === "number");
  assert.deepEqual(
    ((await c2.runs.wait(null, "recall", { input: { query: "sun and sea" } })) as { keys: string[] }).keys[0],
    "sea",
  );

  // The same through the official Python client (async and sync).
  const out = await runPythonClient(
    await sdkPython(),
    path.join(import.meta.dirname, "python-client/runtime_flows.py"),
    [again.url],
    { WHARF_TEST_API_KEY: again.apiKey! },
  );
  assert.match(out, /^ok$/m);

  // A cron of a Python graph fires through the scheduler; the run's webhook gets Python's values.
  const hook = await webhookSink(t);
  const cron = await c2.crons.create("quick", {
    schedule: "0 0 1 1 *",
    input: { text: "cron" },
    webhook: hook.url,
    onRunCompleted: "keep",
  });
  await again.server.ctx.db
    .updateTable("agent_crons")
    .set({ next_run_date: "2000-01-01T00:00:00.000Z" })
    .where("cron_id", "=", cron.cron_id)
    .execute();
  assert.equal(await again.server.crons.tick(), 1);
  const fired = await until("the cron's webhook", async () => hook.received[0]);
  assert.equal(fired.status, "success");
  assert.deepEqual(fired.values, { text: "cron", greeting: "hello from the env map: cron" });
});

test("several workers: a graph blocking its event loop for 5 s does not delay a concurrent run, a killed worker restarts alone; a FastAPI http.app; checkpointer.serde; the project's env map reaches Python", async (t) => {
  const server = await start(t, { env: { WHARF_PYTHON_WORKERS: "2" } });
  if (!server) return;
  const client = server.client();
  assert.equal(server.server.ctx.python!.workers.length, 2);
  const blocked = await client.threads.create();
  const t0 = Date.now();
  const slow = client.runs.wait(blocked.thread_id, "blocking", { input: { seconds: 5 } });
  await until("the blocking run", async () =>
    (await client.runs.list(blocked.thread_id)).some((r) => r.status === "running"),
  );
  const other = await client.threads.create();
  const q0 = Date.now();
  const quick = (await client.runs.wait(other.thread_id, "quick", { input: { text: "now" } })) as Record<
    string,
    unknown
  >;
  const quickMs = Date.now() - q0;
  t.diagnostic(`a quick run beside a run blocking its worker for 5 s: ${quickMs} ms`);
  assert.equal(quick.greeting, "hello from the env map: now");
  // Ordering, not a stopwatch: the quick run ended while the blocking one still runs on the other worker.
  const blocking = (await client.runs.list(blocked.thread_id)).find((r) => r.status === "running");
  assert.ok(blocking, `the quick run (${quickMs} ms) waited for the blocking run to end`);
  const slept = (await slow) as { slept: number };
  assert.ok(slept.slept >= 5, JSON.stringify(slept));
  assert.ok(Date.now() - t0 >= 5000);
  // http.app: the project's FastAPI routes, its middleware on them, behind the server's authentication; the API around them.
  const headers = { "x-api-key": server.apiKey!, "content-type": "application/json" };
  assert.equal((await fetch(`${server.url}/custom/hello/ann`)).status, 401);
  const hello = await fetch(`${server.url}/custom/hello/ann?q=1`, { headers });
  assert.equal(hello.status, 200);
  assert.deepEqual(await hello.json(), { hello: "ann", greeting: "hello from the env map", q: "1" });
  assert.equal(hello.headers.get("x-app-middleware"), "ran");
  const echo = await fetch(`${server.url}/custom/echo`, {
    method: "POST",
    headers,
    body: JSON.stringify({ a: [1, 2] }),
  });
  assert.deepEqual(await echo.json(), { got: { a: [1, 2] } });
  const teapot = await fetch(`${server.url}/custom/teapot`, { headers });
  assert.equal(teapot.status, 418);
  assert.deepEqual(await teapot.json(), { detail: "short and stout" });
  assert.equal((await fetch(`${server.url}/custom/broken`, { headers })).status, 500);
  // A path the app knows with another method: the app's 405; the app's route before the API's.
  assert.equal((await fetch(`${server.url}/custom/echo`, { headers })).status, 405);
  assert.deepEqual(await (await fetch(`${server.url}/assistants/custom`, { headers })).json(), { from: "the app" });
  assert.ok((await client.assistants.search()).length >= 4);
  assert.equal((await fetch(`${server.url}/ok`)).status, 200);

  // Both workers share the checkpoints: either one reads the other's threads.
  for (let i = 0; i < 4; i++)
    assert.deepEqual((await client.threads.getState(blocked.thread_id)).values, { seconds: 5, slept: slept.slept });

  // checkpointer.serde: pickle_fallback lets a plain object into the checkpoints (a TypeError without it).
  const kept = await client.threads.create();
  assert.equal(((await client.runs.wait(kept.thread_id, "keeper", { input: {} })) as { count: number }).count, 1);
  assert.equal(((await client.runs.wait(kept.thread_id, "keeper", { input: {} })) as { count: number }).count, 2);

  // A worker that dies is restarted on its own; the other serves meanwhile.
  const [w1, w2] = server.server.ctx.python!.workers;
  const pid = w1.pid!;
  process.kill(pid, "SIGKILL");
  await until("the worker's end", async () => !w1.up);
  assert.equal((await fetch(`${server.url}/ok`)).status, 200);
  assert.ok(w2.up);
  assert.equal(
    ((await client.runs.wait(null, "quick", { input: { text: "still" } })) as Record<string, unknown>).greeting,
    "hello from the env map: still",
  );
  // A new worker imports and warms up before it serves: seconds on a loaded machine.
  await until("the restarted worker", async () => w1.up, 60_000);
  assert.notEqual(w1.pid, pid);
});

test("checkpointer.path (the project's saver, an async context manager), checkpointer.serde accepted, env from a file", async (t) => {
  const server = await start(t, { project: path.join(PROJECT, "langgraph.saver.json") });
  if (!server) return;
  const client = server.client();
  assert.equal(server.server.ctx.python!.hello!.versions.checkpointer, "MarkingSaver");
  assert.deepEqual(server.server.project.warnings, []);
  const thread = await client.threads.create();
  await client.runs.wait(thread.thread_id, "counter", { input: { total: 0 } });
  const history = await client.threads.getHistory(thread.thread_id, { limit: 10 });
  assert.ok(history.length >= 2);
  assert.ok(
    history.every((h) => h.metadata?.saved_by === "project saver"),
    JSON.stringify(history.map((h) => h.metadata)),
  );
  const resumed = (await client.runs.wait(thread.thread_id, "counter", { command: { resume: "ok" } })) as Record<
    string,
    unknown
  >;
  assert.deepEqual(resumed, { total: 1, note: "confirmed ok" });
  assert.equal(
    ((await client.runs.wait(null, "quick", { input: { text: "x" } })) as Record<string, unknown>).greeting,
    "hello from the env file: x",
  );
  // http.disable_store turns the store routes off; the app still serves.
  assert.equal(
    (await fetch(`${server.url}/store/items?namespace=a&key=b`, { headers: { "x-api-key": server.apiKey! } })).status,
    404,
  );
  assert.equal(
    (await (await fetch(`${server.url}/custom/hello/bo`, { headers: { "x-api-key": server.apiKey! } })).json())
      .greeting,
    "hello from the env file",
  );
});
