import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { sql } from "kysely";
import { pythonAvailable, requireCapability, TEST_PYTHON_ENVS } from "../support/requirements.ts";
import { startTestAgentServer } from "./support.ts";

// A Python project's FastAPI http.app (lifespan, streamed responses), checkpointer.ttl with
// keep_latest, and thread metadata in its checkpoints: one server, one cached environment.
process.env.WHARF_PYTHON_ENVS = TEST_PYTHON_ENVS;
const PROJECT = path.resolve(import.meta.dirname, "fixtures/python-extras");
const say = (content: string) => ({ messages: [{ role: "human", content }] });

for (const dialect of ["sqlite", "postgres"] as const) {
  test(`Python http.app lifespan and streamed responses; checkpointer.ttl keep_latest; thread metadata in checkpoints (${dialect})`, async (t) => {
    if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python graphs")) return;
    const marks = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "wharf-lifespan-")), "marks");
    process.env.EXTRAS_LIFESPAN_LOG = marks;
    t.after(() => delete process.env.EXTRAS_LIFESPAN_LOG);
    const server = await startTestAgentServer(t, { dialect, project: PROJECT });
    if (!server) return;
    const headers = { "x-api-key": server.apiKey! };

    // The lifespan ran before the server answered, and what it yielded is each request's state.
    assert.deepEqual(fs.readFileSync(marks, "utf8").split("\n").filter(Boolean), ["startup"]);
    const pool = await fetch(`${server.url}/extras/pool`, { headers });
    assert.deepEqual(await pool.json(), { pool: "opened at startup" });

    // A StreamingResponse reaches the client chunk by chunk: the first before the app is done.
    const t0 = Date.now();
    const res = await fetch(`${server.url}/extras/ticks?n=3&gap=0.5`, { headers });
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /text\/plain/);
    const reader = res.body!.getReader();
    const first = await reader.read();
    const firstAt = Date.now() - t0;
    assert.equal(new TextDecoder().decode(first.value), "tick 0\n");
    let rest = "";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      rest += new TextDecoder().decode(value);
    }
    const allAt = Date.now() - t0;
    assert.equal(rest, "tick 1\ntick 2\n");
    assert.ok(allAt - firstAt >= 900, `the first chunk came ${firstAt} ms in, the end ${allAt} ms in`);
    // A client that goes away mid-stream: the server keeps serving.
    const gone = new AbortController();
    const long = await fetch(`${server.url}/extras/ticks?n=50&gap=0.2`, { headers, signal: gone.signal });
    await long.body!.getReader().read();
    gone.abort();
    assert.equal((await fetch(`${server.url}/extras/pool`, { headers })).status, 200);

    // Thread metadata reaches the Python checkpoints (state and history), as on the Python server.
    const client = server.client();
    const thread = await client.threads.create({ metadata: { case: "extras" } });
    await client.runs.wait(thread.thread_id, "chat", { input: say("keep me") });
    const history = await client.threads.getHistory(thread.thread_id, { limit: 50 });
    assert.ok(history.length >= 4, `history of ${history.length}`);
    assert.ok(
      history.every((s) => s.metadata?.case === "extras"),
      JSON.stringify(history.map((s) => s.metadata)),
    );
    const before = await client.threads.getState(thread.thread_id);

    // keep_latest: an idle thread keeps its row and its latest state; its older checkpoints go.
    const pruned = await server.server.sweeper.pruneThreads(Date.now() + 2 * 3600_000);
    assert.equal(pruned, 1);
    const after = await client.threads.getState(thread.thread_id);
    assert.deepEqual(after.values, before.values);
    assert.deepEqual(after.next, ["ask"]);
    assert.equal(after.checkpoint.checkpoint_id, before.checkpoint.checkpoint_id);
    assert.equal((await client.threads.getHistory(thread.thread_id, { limit: 50 })).length, 1);
    assert.equal((await client.threads.get(thread.thread_id)).thread_id, thread.thread_id);
    // The pruned thread resumes from its latest checkpoint.
    const resumed = (await client.runs.wait(thread.thread_id, "chat", { command: { resume: "yes" } })) as {
      answer?: string;
    };
    assert.equal(resumed.answer, "yes");
    if (dialect === "postgres") {
      const n = Number(
        (
          await sql<{ n: string }>`SELECT count(*) AS n FROM checkpoints WHERE thread_id = ${thread.thread_id}`.execute(
            server.server.ctx.db,
          )
        ).rows[0].n,
      );
      assert.equal(n, 2, "the kept checkpoint and the resumed run's");
    }

    // The lifespan's shutdown runs when the server stops.
    await server.stop();
    assert.deepEqual(fs.readFileSync(marks, "utf8").split("\n").filter(Boolean), ["startup", "shutdown"]);
  });
}
