import assert from "node:assert/strict";
import crypto from "node:crypto";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { test, type TestContext } from "node:test";
import WebSocket from "ws";
import { Client } from "@langchain/langgraph-sdk";
import { RemoteGraph } from "@langchain/langgraph/remote";
import { protocolSseEvents, rootEnded } from "../agent-server/protocol-support.ts";
import { clusterAvailable, startCluster, type Cluster } from "./cluster.ts";

const PROJECT = path.join(path.dirname(fileURLToPath(import.meta.url)), "../agent-server/fixtures/protocol");
const ALL = ["lifecycle", "values", "updates", "messages", "tools", "input", "custom", "checkpoints", "tasks"];
const say = (content: string) => ({ messages: [{ role: "human", content }] });
const as = (user: string) => ({ authorization: `Bearer user-${user}`, "content-type": "application/json" });
/** An event as replicas must agree on it: everything but the time it was stamped. */
const comparable = (evs: any[]) => evs.map((e) => JSON.stringify({ ...e, params: { ...e.params, timestamp: 0 } }));

async function command(url: string, threadId: string, body: unknown): Promise<any> {
  const res = await fetch(`${url}/threads/${threadId}/commands`, {
    method: "POST",
    headers: as("alice"),
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200);
  return res.json();
}

test("the event-based protocol on 3 replicas behind HAProxy (one cluster for the file)", async (top) => {
  if (!(await clusterAvailable(top))) return;
  const cluster = await startCluster(top, 3, {}, { project: PROJECT });
  await top.test(
    "commands on one replica, the thread's events from every replica: identical, numbered alike, replayed with since",
    (t) => crossReplica(t, cluster),
  );
  await top.test("a WebSocket subscription made on one replica, restored with subscription.reconnect on another", (t) =>
    reconnectElsewhere(t, cluster),
  );
  await top.test(
    "the SDK's ThreadStream (SSE and WebSocket) and RemoteGraph streamEvents v3 through the balancer",
    (t) => sdkThroughBalancer(t, cluster),
  );
});

async function crossReplica(t: TestContext, cluster: Cluster): Promise<void> {
  const [a, b, c] = cluster.replicas;
  const threadId = crypto.randomUUID();
  // run.start on A; its events read from B and C (A may not even execute it).
  const started = await command(a.url, threadId, {
    id: 1,
    method: "run.start",
    params: { assistant_id: "agent", input: say("ask me") },
  });
  assert.equal(started.type, "success", JSON.stringify(started));
  const read = (url: string, since?: number) =>
    protocolSseEvents(
      url,
      as("alice"),
      threadId,
      { channels: ALL, ...(since !== undefined ? { since } : {}) },
      rootEnded,
      20_000,
    );
  const [onA, onB, onC] = await Promise.all([read(a.url), read(b.url), read(c.url)]);
  assert.ok(
    onA.some((e) => e.method === "input.requested"),
    onA.map((e) => e.method).join(","),
  );
  assert.deepEqual(
    onA.map((e) => e.seq),
    onA.map((_, i) => i + 1),
    "seq 1, 2, … with no hole",
  );
  assert.deepEqual(comparable(onB), comparable(onA), "B serves the same events as A");
  assert.deepEqual(comparable(onC), comparable(onA), "C serves the same events as A");

  // The interrupt answered through B; the resumed run's events read from C after the first run's (since).
  const interruptId = onA.find((e) => e.method === "input.requested")!.params.data.interrupt_id;
  const respond = await command(b.url, threadId, {
    id: 2,
    method: "input.respond",
    params: { interrupt_id: interruptId, response: "go" },
  });
  assert.equal(respond.type, "success", JSON.stringify(respond));
  const last = onA.at(-1).seq;
  const after = await protocolSseEvents(
    c.url,
    as("alice"),
    threadId,
    { channels: ["lifecycle", "values"], since: last },
    (evs) =>
      evs.some((e) => e.method === "lifecycle" && !e.params.namespace.length && e.params.data.event === "completed"),
    20_000,
  );
  assert.equal(after[0].seq, last + 1, "replayed from the event after `since`");
  assert.ok(
    after.some((e) => e.method === "values" && e.params.data.answer === "go"),
    JSON.stringify(after.map((e) => e.params.data)),
  );

  // Every replica answers state.get and agent.getTree for the thread from the shared log.
  for (const r of cluster.replicas) {
    const tree = await command(r.url, threadId, { id: 3, method: "agent.getTree", params: {} });
    assert.equal(tree.result.tree.graph_name, "agent", r.name);
    assert.ok(tree.meta.applied_through_seq >= after.at(-1).seq, `${r.name} has seen every event`);
  }
  t.diagnostic(`${onA.length} + ${after.length} events, identical on 3 replicas`);
}

async function sdkThroughBalancer(t: TestContext, cluster: Cluster): Promise<void> {
  const url = cluster.lb.url;
  for (const transport of ["sse", "websocket"] as const) {
    const client =
      transport === "sse"
        ? new Client({
            apiUrl: url,
            apiKey: null,
            defaultHeaders: { authorization: "Bearer user-alice" },
            callerOptions: { maxRetries: 0 },
          })
        : new Client({ apiUrl: url, apiKey: null });
    const thread: ReturnType<Client["threads"]["stream"]> = client.threads.stream({
      assistantId: "agent",
      transport,
      webSocketFactory: (u: string) => new WebSocket(u, { headers: { authorization: "Bearer user-alice" } }) as never,
    });
    const errors: Error[] = [];
    thread.onError((e: Error) => errors.push(e));
    await thread.run.start({ input: say("ask " + transport) });
    const deadline = Date.now() + 20_000;
    while (!thread.interrupted) {
      assert.ok(Date.now() < deadline, `${transport}: no interrupt`);
      await new Promise((r) => setTimeout(r, 50));
    }
    const intr = thread.interrupts[0] as any;
    await thread.input.respond({ interrupt_id: intr.interruptId ?? intr.interrupt_id, response: "go" } as never);
    const rest = new Client({ apiUrl: url, apiKey: null, defaultHeaders: { authorization: "Bearer user-alice" } });
    for (;;) {
      const state = await rest.threads.getState<{ answer?: string }>(thread.threadId);
      if (state.values.answer === "go" && !state.next.length) break;
      assert.ok(Date.now() < deadline, `${transport}: not resumed: ${JSON.stringify(state.values)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await thread.close();
    assert.deepEqual(errors, [], transport);
  }
  const remote = new RemoteGraph({
    graphId: "agent",
    url,
    client: new Client({ apiUrl: url, apiKey: null, defaultHeaders: { authorization: "Bearer user-alice" } }),
  });
  const seen: string[] = [];
  const run = await remote.streamEvents(say("hello"), {
    version: "v3",
    configurable: { thread_id: crypto.randomUUID() },
  } as never);
  for await (const ev of run as AsyncIterable<any>) seen.push(ev.method);
  assert.ok(seen.includes("values") && seen.includes("lifecycle"), seen.join(","));
  t.diagnostic(`RemoteGraph v3 through the balancer: ${seen.length} events`);
}

/** A WebSocket on a thread's event stream as alice, with everything it received. */
async function socket(url: string, threadId: string) {
  const ws = new WebSocket(`${url.replace("http", "ws")}/threads/${threadId}/stream/events`, {
    headers: { authorization: "Bearer user-alice" },
  });
  const msgs: any[] = [];
  let wake = () => {};
  ws.on("message", (d) => {
    msgs.push(JSON.parse(d.toString()));
    wake();
  });
  await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
  // Woken by each message (or the deadline): no polling.
  const until = async (p: (m: any[]) => boolean, ms = 20_000) => {
    const deadline = Date.now() + ms;
    while (!p(msgs) && Date.now() < deadline)
      await new Promise<void>((r) => {
        wake = r;
        setTimeout(r, deadline - Date.now()).unref();
      });
    assert.ok(p(msgs), `timed out; got ${JSON.stringify(msgs).slice(0, 2000)}`);
  };
  return { ws, msgs, send: (m: unknown) => ws.send(JSON.stringify(m)), until };
}

const rootIs = (event: string) => (m: any) =>
  m.type === "event" && m.method === "lifecycle" && m.params.namespace.length === 0 && m.params.data.event === event;

async function reconnectElsewhere(t: TestContext, cluster: Cluster): Promise<void> {
  const [a, b] = cluster.replicas;
  const threadId = crypto.randomUUID();
  const first = await socket(a.url, threadId);
  first.send({ id: 1, method: "subscription.subscribe", params: { channels: ["lifecycle", "values"] } });
  await first.until((m) => m.some((x) => x.id === 1));
  const subId = first.msgs.find((x) => x.id === 1).result.subscription_id as string;
  first.send({ id: 2, method: "run.start", params: { assistant_id: "agent", input: say("ask me") } });
  // The socket to A drops after the run's first event: the rest is missed.
  await first.until((m) => m.some((x) => x.type === "event") && m.some((x) => x.id === 2));
  const runId = first.msgs.find((x) => x.id === 2).result.run_id as string;
  const lastSeen = first.msgs.find((x) => x.type === "event").event_id as string;
  first.ws.terminate();
  const all = await protocolSseEvents(b.url, as("alice"), threadId, { channels: ["lifecycle", "values"] }, rootEnded);

  const second = await socket(b.url, threadId);
  second.send({
    id: 1,
    method: "subscription.reconnect",
    params: { run_id: runId, last_event_id: lastSeen, subscriptions: [subId] },
  });
  await second.until((m) => m.some((x) => x.id === 1));
  const answer = second.msgs.find((x) => x.id === 1);
  assert.equal(answer.type, "success", JSON.stringify(answer));
  assert.equal(answer.result.restored, true);
  await second.until((m) => m.some(rootIs("interrupted")));
  const replayed = second.msgs.filter((x) => x.type === "event");
  assert.deepEqual(
    replayed.map((e) => e.seq),
    all.filter((e) => e.seq > Number(lastSeen)).map((e) => e.seq),
    "exactly the events after the last one seen on A",
  );
  // The restored subscription carries the next run's events live, on B.
  second.send({ id: 2, method: "run.start", params: { assistant_id: "agent", input: say("plain") } });
  await second.until((m) => m.some(rootIs("completed")));
  second.ws.close();
  t.diagnostic(`${replayed.length} missed events replayed on another replica`);
}
