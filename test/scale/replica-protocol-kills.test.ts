import assert from "node:assert/strict";
import crypto from "node:crypto";
import { test, type TestContext } from "node:test";
import { clusterAvailable, startCluster, type Cluster, type Replica } from "./cluster.ts";
import { waitFor } from "./support.ts";

// The event-based protocol's thread log when replicas die mid-run: the replica that received
// `run.start` (it executes nothing here), and the one executing the run while a client streams
// from it. Every step's events reach the thread's log, numbered without a hole or a repeat.

const STEPS = 12;
const JSON_HEADERS = { "content-type": "application/json" };
/** Every channel: the thread's numbering is contiguous only over all of them. */
const ALL = ["lifecycle", "values", "updates", "messages", "tools", "input", "custom", "checkpoints", "tasks"];

interface ProtocolEvent {
  seq: number;
  method: string;
  params: { namespace: string[]; data: any };
}

const rootEnd = (e: ProtocolEvent) =>
  e.method === "lifecycle" && e.params.namespace.length === 0 && e.params.data.event !== "running";

/**
 * Reads a thread's protocol events over SSE from `since` until the root run ends, `stopWhen`
 * says so, the server goes away, or `ms` pass; answers what arrived.
 */
async function readEvents(
  url: string,
  threadId: string,
  since: number,
  ms: number,
  stopWhen: (evs: ProtocolEvent[]) => boolean = () => false,
): Promise<ProtocolEvent[]> {
  const ac = new AbortController();
  const timer = setTimeout(() => ac.abort(), ms);
  const events: ProtocolEvent[] = [];
  try {
    const res = await fetch(`${url}/threads/${threadId}/stream/events`, {
      method: "POST",
      headers: JSON_HEADERS,
      body: JSON.stringify({ channels: ALL, since }),
      signal: ac.signal,
    });
    assert.equal(res.status, 200);
    const decoder = new TextDecoder();
    let buf = "";
    for await (const chunk of res.body!) {
      buf += decoder.decode(chunk as Uint8Array, { stream: true });
      let i: number;
      while ((i = buf.indexOf("\n\n")) >= 0) {
        const data = buf
          .slice(0, i)
          .split("\n")
          .filter((l) => l.startsWith("data: "))
          .map((l) => l.slice(6))
          .join("\n");
        buf = buf.slice(i + 2);
        if (!data) continue;
        events.push(JSON.parse(data) as ProtocolEvent);
        if (rootEnd(events.at(-1)!) || stopWhen(events)) return events;
      }
    }
  } catch (err) {
    // The replica died or the time ran out: what arrived is the answer.
    if (!ac.signal.aborted && !/terminated|ECONNRESET|other side closed/i.test(String((err as Error)?.cause ?? err)))
      throw err;
  } finally {
    clearTimeout(timer);
    ac.abort();
  }
  return events;
}

/** The step numbers of `updates` events (each step appends its number to `done`). */
const stepsOf = (evs: ProtocolEvent[]) =>
  evs
    .filter((e) => e.method === "updates")
    .flatMap((e) => [...JSON.stringify(e.params.data).matchAll(/"done":\[(\d+)\]/g)].map((m) => Number(m[1])));

async function runStart(url: string, threadId: string): Promise<string> {
  const res = await fetch(`${url}/threads/${threadId}/commands`, {
    method: "POST",
    headers: JSON_HEADERS,
    body: JSON.stringify({
      id: 1,
      method: "run.start",
      params: { assistant_id: "steps", input: { steps: STEPS, delay: 250 }, config: { recursion_limit: 200 } },
    }),
  });
  const body = (await res.json()) as { type: string; result?: { run_id: string } };
  assert.equal(body.type, "success", JSON.stringify(body));
  return body.result!.run_id;
}

/** Every event of the thread from a replica still alive, to the root run's end. */
async function wholeLog(t: TestContext, url: string, threadId: string): Promise<ProtocolEvent[]> {
  const all = await readEvents(url, threadId, 0, 60_000);
  t.diagnostic(`thread log: ${all.length} events, steps ${stepsOf(all).join(",")}`);
  return all;
}

function assertComplete(all: ProtocolEvent[]): void {
  assert.deepEqual(
    all.map((e) => e.seq),
    all.map((_, i) => i + 1),
    "seq 1, 2, … with no hole",
  );
  const end = all.at(-1)!;
  assert.ok(rootEnd(end) && end.params.data.event === "completed", `ends completed: ${JSON.stringify(end)}`);
  const steps = new Set(stepsOf(all));
  for (let k = 1; k <= STEPS; k++) assert.ok(steps.has(k), `step ${k} in the log: ${[...steps].join(",")}`);
  const values = all.filter((e) => e.method === "values").at(-1)!;
  assert.deepEqual(
    values.params.data.done,
    Array.from({ length: STEPS }, (_, i) => i + 1),
  );
}

test("the protocol's thread log when replicas die mid-run (3 replicas, the first executes nothing)", async (top) => {
  if (!(await clusterAvailable(top))) return;
  const cluster = await startCluster(
    top,
    3,
    {},
    { envOf: (i): Record<string, string> => (i === 0 ? { WHARF_RUN_SLOTS: "0" } : {}) },
  );
  await top.test("kill -9 of the replica that received run.start", (t) => killReceiver(t, cluster));
  await top.test(
    "kill -9 of the executing replica a client streams from; the client resumes through the balancer",
    (t) => killExecutor(t, cluster),
  );
});

async function killReceiver(t: TestContext, cluster: Cluster): Promise<void> {
  const [receiver, b] = cluster.replicas;
  const threadId = crypto.randomUUID();
  await runStart(receiver.url, threadId);
  // Some steps reach the log through another replica, then the receiver dies.
  const early = await readEvents(b.url, threadId, 0, 30_000, (evs) => stepsOf(evs).length >= 2);
  assert.ok(stepsOf(early).length >= 2, `steps before the kill: ${early.map((e) => e.method).join(",")}`);
  await receiver.signal("SIGKILL");
  assertComplete(await wholeLog(t, b.url, threadId));
}

async function killExecutor(t: TestContext, cluster: Cluster): Promise<void> {
  const alive = cluster.replicas.filter((r) => r.child);
  const threadId = crypto.randomUUID();
  const runId = await runStart(alive[0].url, threadId);
  let executor: Replica | undefined;
  await waitFor(async () => (executor = await cluster.executing(runId)), 30_000, "the run executing");
  // The client streams from the executing replica itself; it dies under it after a few steps.
  const before = await readEvents(executor!.url, threadId, 0, 30_000, (evs) => stepsOf(evs).length >= 3);
  await executor!.signal("SIGKILL");
  const killed = performance.now();
  const last = before.at(-1)!.seq;
  const after = await readEvents(cluster.lb.url, threadId, last, 60_000);
  t.diagnostic(
    `reconnected after seq ${last}; its end arrived ${Math.round(performance.now() - killed)} ms after the kill`,
  );
  const joined = [...before, ...after];
  assertComplete(joined);
  assert.deepEqual(
    (await wholeLog(t, cluster.lb.url, threadId)).map((e) => e.seq),
    joined.map((e) => e.seq),
  );
}
