import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, it } from "node:test";
import WebSocket from "ws";
import { planReconnect, type ReconnectView } from "../../src/agent-server/protocol/reconnect.ts";
import { startTestAgentServer } from "./support.ts";

const PROJECT = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/protocol");
const say = (content: string) => ({ messages: [{ role: "human", content }] });

describe("subscription.reconnect: the plan", () => {
  const values = { channels: new Set(["values"]) };
  const view: ReconnectView = {
    runStarts: new Map([
      ["run-a", 10],
      ["run-b", 40],
    ]),
    subscriptions: new Map([
      ["sub-1", values],
      ["sub-2", { channels: new Set(["lifecycle"]) }],
    ]),
    firstKeptSeq: 5,
    lastSeq: 60,
  };
  const cases: Array<[string, unknown, unknown]> = [
    ["no run", {}, { error: "invalid_argument" }],
    ["unknown run", { run_id: "run-x" }, { error: "no_such_run" }],
    [
      "from the run's start",
      { run_id: "run-b", subscriptions: ["sub-1"] },
      { restore: [["sub-1", values]], after: 40, complete: true },
    ],
    [
      "after the last event seen",
      { run_id: "run-a", last_event_id: "33", subscriptions: ["sub-1", "sub-1"] },
      { restore: [["sub-1", values]], after: 33, complete: true },
    ],
    [
      "events no longer kept",
      { run_id: "run-a", last_event_id: "2", subscriptions: [] },
      { restore: [], after: 2, complete: false },
    ],
    ["an event id from the future", { run_id: "run-a", last_event_id: "61" }, { error: "invalid_argument" }],
    ["a non-numeric event id", { run_id: "run-a", last_event_id: "abc" }, { error: "invalid_argument" }],
    [
      "an unknown subscription",
      { run_id: "run-a", subscriptions: ["sub-1", "sub-9"] },
      { error: "no_such_subscription" },
    ],
    ["subscriptions not a list", { run_id: "run-a", subscriptions: "sub-1" }, { error: "invalid_argument" }],
  ];
  for (const [name, params, want] of cases) {
    it(name, () => {
      const got = planReconnect(params, view) as Record<string, unknown>;
      if ("error" in (want as object)) assert.equal(got.error, (want as { error: string }).error, JSON.stringify(got));
      else assert.deepEqual(got, want);
    });
  }
});

/** A WebSocket on the thread's event stream as a user, with everything it received. */
async function socket(
  url: string,
  user: string,
): Promise<{ ws: WebSocket; msgs: any[]; send(m: unknown): void; until(p: (m: any[]) => boolean): Promise<void> }> {
  const ws = new WebSocket(url, { headers: { authorization: `Bearer user-${user}` } });
  const msgs: any[] = [];
  ws.on("message", (d) => msgs.push(JSON.parse(d.toString())));
  await new Promise((resolve, reject) => ws.once("open", resolve).once("error", reject));
  return {
    ws,
    msgs,
    send: (m) => ws.send(JSON.stringify(m)),
    until: async (p) => {
      const deadline = Date.now() + 15_000;
      while (!p(msgs)) {
        assert.ok(Date.now() < deadline, `timed out; got ${JSON.stringify(msgs).slice(0, 2000)}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
  };
}

const rootIs = (event: string) => (m: any) =>
  m.type === "event" && m.method === "lifecycle" && m.params.namespace.length === 0 && m.params.data.event === event;

describe("subscription.reconnect over WebSocket", () => {
  it("a new socket restores the subscriptions of one that dropped mid-run, gets exactly the events it missed, then live ones", async (t) => {
    const server = await startTestAgentServer(t, { project: PROJECT });
    if (!server) return;
    const threadId = crypto.randomUUID();
    const url = `${server.url.replace("http", "ws")}/threads/${threadId}/stream/events`;

    const first = await socket(url, "alice");
    first.send({ id: 1, method: "subscription.subscribe", params: { channels: ["lifecycle", "values"] } });
    await first.until((m) => m.some((x) => x.id === 1));
    const subId = first.msgs.find((x) => x.id === 1).result.subscription_id as string;
    first.send({ id: 2, method: "run.start", params: { assistant_id: "agent", input: say("ask me") } });
    // The connection drops after the run's first event: everything later is missed.
    await first.until((m) => m.some((x) => x.type === "event") && m.some((x) => x.id === 2));
    const runId = first.msgs.find((x) => x.id === 2).result.run_id as string;
    const lastSeen = first.msgs.find((x) => x.type === "event").event_id as string;
    first.ws.terminate();

    // The run goes on to its interrupt meanwhile (watched over SSE with `since`, which serves the same purpose).
    const sse = await fetch(`${server.url}/threads/${threadId}/stream/events`, {
      method: "POST",
      headers: { authorization: "Bearer user-alice", "content-type": "application/json" },
      body: JSON.stringify({ channels: ["lifecycle", "values"], since: Number(lastSeen) }),
    });
    const reader = sse.body!.getReader();
    let text = "";
    while (!/"event":\s*"interrupted"/.test(text)) text += new TextDecoder().decode((await reader.read()).value);
    await reader.cancel();
    const sseSeqs = [...text.matchAll(/^id: (\d+)$/gm)].map((m) => Number(m[1]));

    const second = await socket(url, "alice");
    second.send({
      id: 1,
      method: "subscription.reconnect",
      params: { run_id: runId, last_event_id: lastSeen, subscriptions: [subId] },
    });
    await second.until((m) => m.some(rootIs("interrupted")));
    const answer = second.msgs.find((x) => x.id === 1);
    assert.equal(answer.type, "success", JSON.stringify(answer));
    assert.equal(answer.result.restored, true);
    const replayed = second.msgs.filter((x) => x.type === "event");
    assert.equal(answer.result.missed_events, replayed.length);
    assert.deepEqual(
      replayed.map((e) => e.seq),
      sseSeqs,
      "the same events as an SSE stream reopened with since",
    );
    assert.ok(replayed.every((e) => e.seq > Number(lastSeen) && ["lifecycle", "values"].includes(e.method)));
    assert.deepEqual(
      answer.result.current_namespaces.find((n: any) => n.namespace.length === 0),
      { namespace: [], status: "interrupted" },
    );

    // The restored subscription carries the next run's events live.
    second.send({ id: 2, method: "run.start", params: { assistant_id: "agent", input: say("plain") } });
    await second.until((m) => m.some(rootIs("completed")));

    // Bad reconnects: a clear error on this socket only, which keeps working.
    second.send({
      id: 3,
      method: "subscription.reconnect",
      params: { run_id: crypto.randomUUID(), subscriptions: [subId] },
    });
    second.send({ id: 4, method: "subscription.reconnect", params: { run_id: runId, subscriptions: ["sub-999"] } });
    second.send({ id: 6, method: "subscription.reconnect", params: { run_id: runId, last_event_id: "999999" } });
    second.send({ id: 7, method: "agent.getTree", params: {} });
    await second.until((m) => m.some((x) => x.id === 7));
    assert.deepEqual(
      [3, 4, 6].map((id) => second.msgs.find((x) => x.id === id).error),
      ["no_such_run", "no_such_subscription", "invalid_argument"],
    );
    assert.equal(second.msgs.find((x) => x.id === 7).type, "success");
    second.ws.close();
  });
});
