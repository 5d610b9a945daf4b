import assert from "node:assert/strict";
import { test } from "node:test";
import { startTestAgentServer } from "./support.ts";

const say = (content: string) => ({ messages: [{ role: "human", content }] });

test("GET /threads/{id}/stream (SDK threads.joinStream): the current run from its start, then each next run, until the client leaves", async (t) => {
  const server = await startTestAgentServer(t, {});
  if (!server) return;
  const client = server.client();
  const thread = await client.threads.create();
  const run1 = await client.runs.create(thread.thread_id, "slow", { input: say("sleep 300"), streamMode: ["updates"] });

  const events: Array<{ id?: string; event: string; data: any }> = [];
  const leave = new AbortController();
  let notify: () => void = () => {};
  const following = (async () => {
    try {
      for await (const chunk of client.threads.joinStream(thread.thread_id, { signal: leave.signal })) {
        events.push(chunk);
        notify();
      }
    } catch (err) {
      if (!leave.signal.aborted) throw err;
    }
  })();
  const until = async (pred: () => boolean) => {
    const deadline = Date.now() + 5000;
    while (!pred()) {
      assert.ok(Date.now() < deadline, `timed out; events so far: ${JSON.stringify(events.map((e) => e.event))}`);
      await new Promise<void>((r) => {
        notify = r;
        setTimeout(r, 100);
      });
    }
  };

  await client.runs.join(thread.thread_id, run1.run_id);
  const run2 = await client.runs.create(thread.thread_id, "echo", { input: say("hi"), streamMode: ["updates"] });
  await until(() => events.filter((e) => e.event === "updates").length >= 2);
  leave.abort();
  await following;

  assert.deepEqual(
    events.map((e) => e.event),
    ["metadata", "updates", "metadata", "updates"],
  );
  assert.equal(events[0].data.run_id, run1.run_id);
  assert.equal(events[2].data.run_id, run2.run_id);
  assert.match(events[1].data.work.messages[0].content, /done: sleep 300/);
  assert.match(events[3].data.echo.messages[0].content, /echo: hi/);
  assert.equal(events[0].id, `${run1.run_id}:0`);
  assert.equal(events[3].id, `${run2.run_id}:1`);

  // Last-Event-ID resumes the current run after that event.
  const run3 = await client.runs.create(thread.thread_id, "slow", { input: say("sleep 300"), streamMode: ["updates"] });
  const resumed: string[] = [];
  const stop = new AbortController();
  try {
    for await (const chunk of client.threads.joinStream(thread.thread_id, {
      lastEventId: `${run3.run_id}:0`,
      signal: stop.signal,
    })) {
      resumed.push(chunk.event);
      if (chunk.event === "updates") stop.abort();
    }
  } catch (err) {
    if (!stop.signal.aborted) throw err;
  }
  assert.deepEqual(resumed, ["updates"]);

  // Unknown thread → 404; unsupported thread stream modes → 422; credentials required.
  const h = { "x-api-key": server.apiKey! };
  assert.equal((await fetch(`${server.url}/threads/${crypto.randomUUID()}/stream`, { headers: h })).status, 404);
  assert.equal(
    (await fetch(`${server.url}/threads/${thread.thread_id}/stream?stream_mode=lifecycle`, { headers: h })).status,
    422,
  );
  assert.equal((await fetch(`${server.url}/threads/${thread.thread_id}/stream`)).status, 401);
});
