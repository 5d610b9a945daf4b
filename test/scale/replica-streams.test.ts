import assert from "node:assert/strict";
import fs from "node:fs";
import { test, type TestContext } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { startAgentServer } from "../../src/agent-server/index.ts";
import { createLogger } from "../../src/log/logger.ts";
import { tempHome } from "../support/dialects.ts";
import {
  clusterAvailable,
  type Cluster,
  createStepsRun,
  followRun,
  readSse,
  startCluster,
  STEPS_PROJECT,
  waitForStatus,
  type SseEvent,
} from "./cluster.ts";

const INPUT = { steps: 8, delay: 120 };
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
/** Events as a client compares them: the run id in `metadata` differs between runs. */
const comparable = (evs: SseEvent[]) =>
  evs.map((e) => `${e.id}|${e.event}|${e.data.replace(/"run_id":\s*"[0-9a-f-]+"/, '"run_id":"…"')}`);

test("3 replicas behind HAProxy (one cluster for the file: starting replicas is most of its time)", async (top) => {
  if (!(await clusterAvailable(top))) return;
  const cluster = await startCluster(top, 3);
  await top.test(
    "a run is streamed from replicas that do not execute it, events identical to one process; the SDK streams through the balancer",
    (t) => sameEvents(t, cluster),
  );
  await top.test("GET /threads/{id}/stream on one replica follows runs that start on another", (t) =>
    threadStream(t, cluster),
  );
  await top.test(
    "kill -9 the replica serving a stream: the client reconnects through the balancer with Last-Event-ID, nothing missing or repeated",
    (t) => servingReplicaKilled(t, cluster),
  );
});

async function sameEvents(t: TestContext, cluster: Cluster): Promise<void> {
  const { threadId, runId } = await createStepsRun(cluster.lb.url, INPUT);
  await waitForStatus(cluster.lb.url, threadId, runId, ["running", "success"], 10_000);
  const exec = await cluster.executing(runId);
  assert.ok(exec, "the run executes on one of the replicas");
  // Every replica streams the run from its start; the executing one from memory, the others from Redis.
  const got = new Map<string, Array<SseEvent & { at: number }>>();
  await Promise.all(
    cluster.replicas.map((r) => {
      const list: Array<SseEvent & { at: number }> = [];
      got.set(r.name, list);
      return followRun(r.url, threadId, runId, "-1", (e) => list.push({ ...e, at: performance.now() }));
    }),
  );
  const local = got.get(exec!.name)!;
  assert.equal(local.filter((e) => e.event === "values").length, INPUT.steps + 1);
  for (const r of cluster.replicas)
    assert.deepEqual(comparable(got.get(r.name)!), comparable(local), `replica ${r.name} (executing: ${exec!.name})`);

  // Cross-replica latency against the local fast path, event by event (same clock: this process).
  const lags: number[] = [];
  for (const r of cluster.replicas)
    if (r !== exec) got.get(r.name)!.forEach((e, i) => i > 0 && lags.push(e.at - local[i].at));
  t.diagnostic(
    `cross-replica event lag vs local: p50 ${pct(lags, 50).toFixed(1)} ms, p99 ${pct(lags, 99).toFixed(1)} ms (${lags.length} events)`,
  );

  // The same graph in one process (SQLite, no Redis): the same events.
  const home = tempHome();
  t.after(() => fs.rmSync(home, { recursive: true, force: true }));
  const single = await startAgentServer({
    projectDir: STEPS_PROJECT,
    host: "127.0.0.1",
    port: 0,
    databaseUrl: null,
    home,
    open: true,
    log: createLogger({ level: "silent" }),
  });
  t.after(() => single.stop());
  const ref = await createStepsRun(single.url, INPUT);
  const refEvents: SseEvent[] = [];
  await followRun(single.url, ref.threadId, ref.runId, "-1", (e) => refEvents.push(e));
  assert.deepEqual(comparable(local), comparable(refEvents));

  // The official SDK through the balancer: create-and-stream, and joining a run by id.
  const client = new Client({ apiUrl: cluster.lb.url, apiKey: null, callerOptions: { maxRetries: 0 } });
  const thread = await client.threads.create();
  const chunks: string[] = [];
  for await (const c of client.runs.stream(thread.thread_id, "steps", {
    input: { steps: 4, delay: 50 },
    streamMode: "values",
  }))
    chunks.push(c.event);
  assert.deepEqual(chunks, ["metadata", "values", "values", "values", "values", "values"]);
  const second = await createStepsRun(cluster.lb.url, { steps: 5, delay: 100 });
  const joined: string[] = [];
  for await (const c of client.runs.joinStream(second.threadId, second.runId, { lastEventId: "-1" }))
    joined.push(c.event);
  assert.equal(joined.filter((e) => e === "values").length, 6);
  assert.deepEqual((await client.runs.join(second.threadId, second.runId)) as unknown, {
    steps: 5,
    delay: 100,
    done: [1, 2, 3, 4, 5],
  });
}

async function threadStream(t: TestContext, cluster: Cluster): Promise<void> {
  const [watcher, runner] = cluster.replicas;
  const th = (await (
    await fetch(`${runner.url}/threads`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: "{}",
    })
  ).json()) as { thread_id: string };
  const stop = new AbortController();
  t.after(() => stop.abort());
  const res = await fetch(`${watcher.url}/threads/${th.thread_id}/stream`, { signal: stop.signal });
  const seen: SseEvent[] = [];
  const reading = readSse(res, (e) => {
    seen.push(e);
    if (e.event === "values" && (JSON.parse(e.data) as { done: number[] }).done.length === 3) stop.abort();
  }).catch(() => {});
  await new Promise((r) => setTimeout(r, 300)); // the watch is in place
  const created = await fetch(`${runner.url}/threads/${th.thread_id}/runs`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ assistant_id: "steps", input: { steps: 3, delay: 50 } }),
  });
  const run = (await created.json()) as { run_id: string };
  await Promise.race([reading, new Promise((r) => setTimeout(r, 15_000))]);
  assert.equal((await cluster.executing(run.run_id).catch(() => undefined)) === watcher, false);
  assert.equal(seen[0]?.event, "metadata");
  assert.deepEqual(
    seen.map((e) => e.id),
    seen.map((_, i) => `${run.run_id}:${i}`),
  );
  assert.equal(seen.filter((e) => e.event === "values").length, 4);
}

async function servingReplicaKilled(t: TestContext, cluster: Cluster): Promise<void> {
  const { threadId, runId } = await createStepsRun(cluster.lb.url, { steps: 14, delay: 150 });
  await waitForStatus(cluster.lb.url, threadId, runId, ["running"], 10_000);
  const exec = await cluster.executing(runId);
  assert.ok(exec);
  // Open streams through the balancer until one is served by a replica that does not execute the run.
  const tries: AbortController[] = [];
  t.after(() => tries.forEach((a) => a.abort()));
  let res: Response | null = null;
  for (let i = 0; i < 10 && !res; i++) {
    const a = new AbortController();
    tries.push(a);
    const r = await fetch(`${cluster.lb.url}/threads/${threadId}/runs/${runId}/stream`, {
      headers: { "last-event-id": "-1" },
      signal: a.signal,
    });
    if (r.headers.get("x-served-by") !== exec!.name) res = r;
  }
  assert.ok(res, "a stream served by a replica that does not execute the run");
  const serving = cluster.replicas.find((r) => r.name === res!.headers.get("x-served-by"))!;
  const ids: number[] = [];
  let last = "-1";
  let killedAt = 0;
  let gap = 0;
  let reconnected = false;
  const onEvent = (e: SseEvent) => {
    if (reconnected && !gap) gap = performance.now() - killedAt;
    if (e.id !== undefined) {
      ids.push(Number(e.id));
      last = e.id;
    }
    if (ids.length === 4 && !killedAt) {
      killedAt = performance.now();
      void serving.signal("SIGKILL");
    }
  };
  await readSse(res!, onEvent).catch(() => {}); // the replica died: the stream breaks
  assert.ok(killedAt, "the serving replica was killed mid-stream");
  let reconnects = 0;
  while ((await waitForStatus(cluster.lb.url, threadId, runId, ["running", "success"], 5000)) && reconnects < 5) {
    reconnects++;
    reconnected = true;
    const r = await fetch(`${cluster.lb.url}/threads/${threadId}/runs/${runId}/stream`, {
      headers: { "last-event-id": last },
    });
    assert.notEqual(r.headers.get("x-served-by"), serving.name);
    await readSse(r, onEvent);
    break;
  }
  t.diagnostic(
    `reconnect gap (kill -9 of the serving replica → next event through the balancer): ${gap.toFixed(0)} ms`,
  );
  assert.deepEqual(
    ids,
    ids.map((_, i) => i),
    `ids ${ids.join(",")}`,
  );
  assert.equal(await waitForStatus(cluster.lb.url, threadId, runId, ["success"], 10_000), "success");
  const state = (await (await fetch(`${cluster.lb.url}/threads/${threadId}/state`)).json()) as {
    values: { done: number[] };
  };
  assert.equal(state.values.done.length, 14);
}
