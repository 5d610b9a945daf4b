import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import WebSocket from "ws";
import { Client } from "@langchain/langgraph-sdk";
import { RemoteGraph } from "@langchain/langgraph/remote";
import { protocolSseEvents, rootEnded } from "./protocol-support.ts";
import { startTestAgentServer, type TestAgentServer } from "./support.ts";
import { DIALECTS } from "../support/dialects.ts";

const PROJECT = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/protocol");
const ALL = ["lifecycle", "values", "updates", "messages", "tools", "input", "custom", "checkpoints", "tasks"];
const say = (content: string) => ({ messages: [{ role: "human", content }] });
const as = (user: string) => ({ authorization: `Bearer user-${user}`, "content-type": "application/json" });

function sdk(server: TestAgentServer, user: string): Client {
  return new Client({
    apiUrl: server.url,
    apiKey: null,
    defaultHeaders: { authorization: `Bearer user-${user}` },
    callerOptions: { maxRetries: 0 },
  });
}

async function command(
  server: TestAgentServer,
  user: string,
  threadId: string,
  body: unknown,
): Promise<{ status: number; body: any }> {
  const res = await fetch(`${server.url}/threads/${threadId}/commands`, {
    method: "POST",
    headers: as(user),
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

const sseEvents = (
  server: TestAgentServer,
  user: string,
  threadId: string,
  filter: Record<string, unknown>,
  until: (events: any[]) => boolean,
) => protocolSseEvents(server.url, as(user), threadId, filter, until);

for (const dialect of DIALECTS) {
  test(`protocol over SSE (${dialect}): a run's lifecycle, values, messages, tool calls, subgraphs and interrupt; resume; reconnect with since`, async (t) => {
    const server = await startTestAgentServer(t, { dialect, project: PROJECT });
    if (!server) return;
    const threadId = crypto.randomUUID();
    const started = await command(server, "alice", threadId, {
      id: 1,
      method: "run.start",
      params: { assistant_id: "agent", input: say("ask me") },
    });
    assert.equal(started.status, 200);
    assert.equal(started.body.type, "success");
    assert.equal(started.body.id, 1);
    assert.match(started.body.result.run_id, /^[0-9a-f-]{36}$/);
    assert.equal(started.body.meta.thread_id, threadId);

    const events = await sseEvents(server, "alice", threadId, { channels: ALL }, rootEnded);
    const seqs = events.map((e) => e.seq);
    assert.deepEqual(
      seqs,
      [...seqs].sort((a, b) => a - b),
      "in seq order",
    );
    assert.equal(new Set(seqs).size, seqs.length, "no seq twice");
    const root = events
      .filter((e) => e.method === "lifecycle" && e.params.namespace.length === 0)
      .map((e) => e.params.data.event);
    assert.deepEqual(root, ["running", "interrupted"]);
    const methods = new Set(events.map((e) => e.method));
    for (const m of ["values", "updates", "messages", "tools", "checkpoints", "tasks", "input.requested"])
      assert.ok(methods.has(m), `a ${m} event`);
    const tool = events.filter((e) => e.method === "tools").map((e) => e.params.data.event);
    assert.deepEqual(tool, ["tool-started", "tool-finished"]);
    assert.ok(
      events.some(
        (e) =>
          e.method === "lifecycle" &&
          e.params.namespace[0]?.startsWith("research:") &&
          e.params.data.event === "started",
      ),
      "the subgraph's lifecycle",
    );
    assert.ok(
      events.some(
        (e) =>
          e.method === "messages" &&
          e.params.namespace.length === 2 &&
          e.params.data.delta?.text === "from the subgraph",
      ),
      "the subgraph's message, under its namespace",
    );
    // State payloads carry messages in the protocol's shape, never `__interrupt__`.
    const lastValues = events.filter((e) => e.method === "values" && e.params.namespace.length === 0).at(-1)
      .params.data;
    assert.equal(lastValues.__interrupt__, undefined);
    assert.deepEqual(lastValues.messages[1].tool_calls, [
      { id: "call-1", name: "lookup", args: { q: "ask me" }, type: "tool_call" },
    ]);
    assert.equal(
      events.filter(
        (e) => e.method === "values" && e.params.namespace.length === 0 && e.params.data.messages.length === 1,
      ).length,
      1,
      "each state once",
    );
    const asked = events.find((e) => e.method === "input.requested");
    assert.deepEqual(asked.params.data.payload, { question: "proceed?" });

    // Answer the interrupt; a reconnect with `since` gets only what came after.
    const since = events.at(-1).seq;
    const bad = await command(server, "alice", threadId, {
      id: 2,
      method: "input.respond",
      params: { interrupt_id: "nope", response: "yes" },
    });
    assert.equal(bad.body.error, "no_such_interrupt");
    const ok = await command(server, "alice", threadId, {
      id: 3,
      method: "input.respond",
      params: { interrupt_id: asked.params.data.interrupt_id, response: "yes" },
    });
    assert.equal(ok.body.type, "success", JSON.stringify(ok.body));
    const after = await sseEvents(server, "alice", threadId, { channels: ["lifecycle", "values"], since }, rootEnded);
    assert.ok(after.every((e) => e.seq > since));
    assert.equal(after[0].seq, since + 1, "nothing lost between the two connections");
    assert.deepEqual(
      after.filter((e) => e.method === "lifecycle" && !e.params.namespace.length).map((e) => e.params.data.event),
      ["running", "completed"],
    );
    assert.equal(after.filter((e) => e.method === "values").at(-1).params.data.answer, "yes");

    // Namespace filter with depth: only the subgraph's own events.
    const sub = await sseEvents(
      server,
      "alice",
      threadId,
      { channels: ["lifecycle"], namespaces: [["research"]], depth: 0 },
      (evs) => evs.length >= 2,
    );
    assert.ok(sub.every((e) => e.params.namespace.length === 1 && e.params.namespace[0].startsWith("research:")));

    const state = await command(server, "alice", threadId, {
      id: 4,
      method: "state.get",
      params: { namespace: [], keys: ["answer"] },
    });
    assert.deepEqual(state.body.result.values, { answer: "yes" });
    assert.match(state.body.result.checkpoint.id, /./);
    const tree = await command(server, "alice", threadId, { id: 5, method: "agent.getTree", params: {} });
    assert.equal(tree.body.result.tree.graph_name, "agent");
    assert.ok(tree.body.result.tree.children.some((c: any) => c.graph_name === "research"));
  });
}

test("protocol: the SDK's threads.stream() (SSE and WebSocket) and RemoteGraph streamEvents v3", async (t) => {
  const server = await startTestAgentServer(t, { project: PROJECT });
  if (!server) return;
  for (const transport of ["sse", "websocket"] as const) {
    // The browser-safe WebSocket transport refuses default headers: the token goes on the socket itself.
    const client: Client =
      transport === "sse" ? sdk(server, "alice") : new Client({ apiUrl: server.url, apiKey: null });
    const thread: ReturnType<Client["threads"]["stream"]> = client.threads.stream({
      assistantId: "agent",
      transport,
      // Node 20 has no global WebSocket: the `ws` package's, with the user's token (browsers send cookies instead).
      webSocketFactory: (url: string) =>
        new WebSocket(url, { headers: { authorization: "Bearer user-alice" } }) as never,
    });
    const errors: Error[] = [];
    thread.onError((e: Error) => errors.push(e));
    const tools: any[] = [];
    const toolsDone = (async () => {
      for await (const tc of thread.toolCalls) tools.push(tc);
    })();
    await thread.run.start({ input: say("ask " + transport) });
    const deadline = Date.now() + 10_000;
    while (!thread.interrupted) {
      assert.ok(Date.now() < deadline, `${transport}: no interrupt`);
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.equal(thread.interrupts.length, 1);
    await thread.input.respond({
      interrupt_id: (thread.interrupts[0] as any).interruptId ?? (thread.interrupts[0] as any).interrupt_id,
      response: "go",
    } as never);
    // The resumed run's end, as any client sees it.
    const rest = sdk(server, "alice");
    for (;;) {
      const state = await rest.threads.getState<{ answer?: string }>(thread.threadId);
      if (state.values.answer === "go" && !state.next.length) break;
      assert.ok(Date.now() < deadline, `${transport}: not resumed: ${JSON.stringify(state.values)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(tools.length >= 1 && tools[0].name === "lookup", `${transport}: tool calls ${JSON.stringify(tools)}`);
    await thread.close();
    await Promise.race([toolsDone, new Promise((r) => setTimeout(r, 500))]);
    assert.deepEqual(errors, []);
  }

  // RemoteGraph (the graph as a client of Wharf) streaming protocol events.
  const remote = new RemoteGraph({ graphId: "agent", url: server.url, client: sdk(server, "alice") });
  const seen: string[] = [];
  const run = await remote.streamEvents(say("hello"), {
    version: "v3",
    configurable: { thread_id: crypto.randomUUID() },
  } as never);
  for await (const ev of run as AsyncIterable<any>) seen.push(ev.method);
  // RemoteGraph subscribes to what its run-stream projections need (lifecycle, values, checkpoints).
  assert.ok(seen.includes("values") && seen.includes("lifecycle"), seen.join(","));
});

test("protocol bad input and auth: malformed commands, unknown channels, another user's thread; a clear error on that stream only", async (t) => {
  const server = await startTestAgentServer(t, { project: PROJECT });
  if (!server) return;
  const threadId = crypto.randomUUID();
  const started = await command(server, "alice", threadId, {
    id: 1,
    method: "run.start",
    params: { assistant_id: "agent", input: say("hi") },
  });
  assert.equal(started.body.type, "success");
  await sseEvents(server, "alice", threadId, { channels: ["lifecycle"] }, rootEnded);

  for (const [body, loc] of [
    ["{nope", "body"],
    [{ method: "run.start" }, "id"],
    [{ id: -1, method: "x" }, "id"],
    [{ id: 1 }, "method"],
    [{ id: 1, method: "x", params: [] }, "params"],
  ] as const) {
    const r = await command(server, "alice", threadId, body);
    assert.equal(r.status, 422, JSON.stringify(body));
    assert.ok(r.body.detail[0].loc.includes(loc), JSON.stringify(r.body));
  }
  assert.equal(
    (await command(server, "alice", threadId, { id: 2, method: "warp.drive" })).body.error,
    "unknown_command",
  );
  assert.equal(
    (await command(server, "alice", threadId, { id: 3, method: "run.start", params: {} })).body.error,
    "invalid_argument",
  );
  assert.equal(
    (
      await command(server, "alice", threadId, {
        id: 4,
        method: "run.start",
        params: { assistant_id: "nope", input: say("x") },
      })
    ).body.error,
    "invalid_argument",
  );
  assert.equal(
    (await command(server, "alice", threadId, { id: 5, method: "input.respond", params: {} })).body.error,
    "invalid_argument",
  );

  const stream = (user: string, body: unknown) =>
    fetch(`${server.url}/threads/${threadId}/stream/events`, {
      method: "POST",
      headers: as(user),
      body: JSON.stringify(body),
    });
  let r = await stream("alice", { channels: ["values", "bogus"] });
  assert.equal(r.status, 422);
  assert.deepEqual((await r.json()).detail[0].loc, ["body", "channels", 1]);
  r = await stream("alice", { channels: ["values"], extra: 1 });
  assert.equal(r.status, 422);
  r = await stream("alice", { channels: [] });
  assert.equal(r.status, 422);

  // Bob: his commands on Alice's thread are refused, his stream is a 404, his socket gets one error and closes.
  const bob = await command(server, "bob", threadId, { id: 1, method: "state.get", params: {} });
  assert.equal(bob.body.type, "error");
  assert.match(bob.body.message, /not found/);
  const bobRun = await command(server, "bob", threadId, {
    id: 2,
    method: "run.start",
    params: { assistant_id: "agent", input: say("mine now") },
  });
  assert.equal(bobRun.body.type, "error");
  r = await stream("bob", { channels: ["values"] });
  assert.equal(r.status, 404);
  const wsUrl = `${server.url.replace("http", "ws")}/threads/${threadId}/stream/events`;
  const bobWs = new WebSocket(wsUrl, { headers: { authorization: "Bearer user-bob" } });
  const bobMsgs: any[] = [];
  bobWs.on("message", (d) => bobMsgs.push(JSON.parse(d.toString())));
  const code = await new Promise<number>((resolve) => bobWs.on("close", (c) => resolve(c)));
  assert.equal(code, 1008);
  assert.equal(bobMsgs[0].type, "error");
  assert.equal(bobMsgs[0].error, "permission_denied");
  // No credentials: the upgrade is refused as the REST routes refuse.
  const anon = new WebSocket(wsUrl);
  const status = await new Promise<number>((resolve) =>
    anon.on("unexpected-response", (_req, res) => resolve(res.statusCode ?? 0)).on("error", () => {}),
  );
  assert.equal(status, 401);

  // Alice's socket: bad frames get errors on it, and it keeps working.
  const ws = new WebSocket(wsUrl, { headers: { authorization: "Bearer user-alice" } });
  const msgs: any[] = [];
  ws.on("message", (d) => msgs.push(JSON.parse(d.toString())));
  await new Promise((resolve) => ws.on("open", resolve));
  ws.send("{not json");
  ws.send(JSON.stringify({ id: "one", method: "x" }));
  ws.send(JSON.stringify({ id: 7, method: "subscription.subscribe", params: { channels: ["bogus"] } }));
  ws.send(JSON.stringify({ id: 8, method: "subscription.unsubscribe", params: { subscription_id: "nope" } }));
  ws.send(JSON.stringify({ id: 9, method: "subscription.subscribe", params: { channels: ["lifecycle"] } }));
  ws.send(JSON.stringify({ id: 10, method: "run.start", params: { assistant_id: "agent", input: say("again") } }));
  const deadline = Date.now() + 10_000;
  while (
    !msgs.some(
      (m) =>
        m.method === "lifecycle" &&
        !m.params.namespace.length &&
        m.params.data.event === "completed" &&
        m.seq > started.body.meta.applied_through_seq + 5,
    )
  ) {
    assert.ok(Date.now() < deadline, JSON.stringify(msgs));
    await new Promise((r) => setTimeout(r, 50));
  }
  ws.close();
  assert.deepEqual(
    msgs.slice(0, 4).map((m) => [m.type, m.id, m.error]),
    [
      ["error", null, "invalid_argument"],
      ["error", null, "invalid_argument"],
      ["error", 7, "invalid_argument"],
      ["error", 8, "no_such_subscription"],
    ],
  );
  assert.equal(msgs[4].type, "success");
  assert.equal(msgs[4].id, 9);
  assert.ok(msgs.some((m) => m.type === "success" && m.id === 10));
  assert.ok(
    msgs.filter((m) => m.type === "event").every((m) => m.method === "lifecycle"),
    "only the subscribed channel",
  );
});

test("protocol: a WebSocket that never reads is closed with a clear error; the run and the thread's other streams go on", async (t) => {
  const server = await startTestAgentServer(t, { project: PROJECT });
  if (!server) return;
  const threadId = crypto.randomUUID();
  const wsUrl = `${server.url.replace("http", "ws")}/threads/${threadId}/stream/events`;
  const ws = new WebSocket(wsUrl, { headers: { authorization: "Bearer user-alice" } });
  const msgs: any[] = [];
  ws.on("message", (d) => msgs.push(JSON.parse(d.toString())));
  const closed = new Promise<{ code: number; reason: string }>((resolve) =>
    ws.on("close", (code, reason) => resolve({ code, reason: reason.toString() })),
  );
  await new Promise((resolve) => ws.on("open", resolve));
  ws.send(JSON.stringify({ id: 1, method: "subscription.subscribe", params: { channels: ["custom", "lifecycle"] } }));
  ws.send(JSON.stringify({ id: 2, method: "run.start", params: { assistant_id: "flood", input: say("go") } }));
  // The client stops reading: its socket's buffers fill and the server's unsent bytes grow.
  await new Promise((r) => setTimeout(r, 200));
  (ws as unknown as { _socket: { pause(): void; resume(): void } })._socket.pause();

  // Another consumer of the same thread reads everything, to the run's end.
  const events = await sseEvents(server, "alice", threadId, { channels: ["custom", "lifecycle"] }, rootEnded);
  assert.equal(events.filter((e) => e.method === "custom").length, 1500);
  assert.equal(
    events.filter((e) => e.method === "lifecycle" && !e.params.namespace.length).at(-1).params.data.event,
    "completed",
  );

  (ws as unknown as { _socket: { resume(): void } })._socket.resume();
  const end = await Promise.race([closed, new Promise<null>((r) => setTimeout(() => r(null), 10_000))]);
  assert.ok(end, "the server closed the socket of the client that did not read");
  assert.equal(end.code, 1013);
  const last = msgs.at(-1);
  assert.equal(last.type, "error");
  assert.match(last.message, /not reading/);
  assert.ok(msgs.filter((m) => m.method === "custom").length < 1500, "it did not get everything buffered for it");
});
