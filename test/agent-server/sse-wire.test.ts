import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { ECHO_EXAMPLE, startTestAgentServer } from "./support.ts";

// Captures of the LangGraph JS server's answers (copied from the shared reference so that a fresh
// clone tests against them without the reference folder beside it).
const WIRE = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "fixtures/wire");
const hi = { messages: [{ role: "human", content: "hi" }] };

/** Splits an SSE body into frames: {event, data (re-joined and parsed), id, raw}. */
function frames(body: string) {
  return body
    .split("\n\n")
    .filter((f) => f.trim())
    .map((raw) => {
      const lines = raw.split("\n");
      const event = lines.find((l) => l.startsWith("event: "))?.slice(7);
      const data = lines
        .filter((l) => l.startsWith("data: "))
        .map((l) => l.slice(6))
        .join("\n");
      const id = lines.find((l) => l.startsWith("id: "))?.slice(4);
      return { event, data: JSON.parse(data), id, raw };
    });
}

const post = (url: string, body: unknown) =>
  fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });

describe("agent server wire format (raw HTTP, like curl -N)", () => {
  test("stateless stream framing, headers and event names match the LangGraph server", async (t) => {
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const res = await post(`${server.url}/runs/stream`, { assistant_id: "echo", input: hi, stream_mode: "updates" });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    assert.equal(res.headers.get("cache-control"), "no-cache");
    assert.equal(res.headers.get("access-control-allow-origin"), "*");
    assert.equal(res.headers.get("access-control-expose-headers"), "content-location,x-pagination-total");
    const location = res.headers.get("content-location")!;
    assert.match(location, /^\/runs\/[0-9a-f-]{36}$/);
    const body = await res.text();
    const runId = location.slice("/runs/".length);
    // The metadata frame is byte for byte the captured one (pretty JSON over several data: lines, no id:).
    const captured = fs.readFileSync(path.join(WIRE, "stream_updates.sse"), "utf8");
    const capturedMeta = captured
      .slice(0, captured.indexOf("\n\n") + 2)
      .replace(/"run_id": "[^"]+"/, `"run_id": "${runId}"`);
    assert.ok(body.startsWith(capturedMeta), `metadata frame differs:\n${body.slice(0, 200)}`);
    const f = frames(body);
    assert.deepEqual(
      f.map((x) => x.event),
      ["metadata", "updates"],
    );
    assert.equal(f[1].id, undefined);
    assert.ok(
      f[1].raw
        .split("\n")
        .slice(1)
        .every((l) => l.startsWith("data: ")),
    );
    assert.equal(f[1].raw.split("\n")[2], 'data:   "echo": {');
    assert.equal(f[1].data.echo.messages[0].content, "echo: hi");
    assert.ok(body.endsWith("\n\n"));

    // A list of modes: values, messages (for messages-tuple), updates, values, in the graph's order.
    const multi = frames(
      await (
        await post(`${server.url}/runs/stream`, {
          assistant_id: "echo",
          input: hi,
          stream_mode: ["values", "updates", "messages-tuple"],
        })
      ).text(),
    );
    assert.deepEqual(
      multi.map((x) => x.event),
      ["metadata", "values", "messages", "updates", "values"],
    );
    assert.equal(multi[2].data[0].content, "echo: hi");
    assert.equal(multi[2].data[1].langgraph_node, "echo");
    // The legacy "messages" mode: complete messages as they appear in the state.
    const legacy = frames(
      await (
        await post(`${server.url}/runs/stream`, { assistant_id: "echo", input: hi, stream_mode: "messages" })
      ).text(),
    );
    assert.deepEqual(
      legacy.map((x) => x.event),
      ["metadata", "messages/complete", "messages/complete"],
    );
  });

  test("thread streams carry id: after the data lines; wait answers text/plain with the final state", async (t) => {
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const thread = await (await post(`${server.url}/threads`, {})).json();
    const res = await post(`${server.url}/threads/${thread.thread_id}/runs/stream`, {
      assistant_id: "echo",
      input: hi,
      stream_mode: "updates",
    });
    assert.match(res.headers.get("content-location")!, new RegExp(`^/threads/${thread.thread_id}/runs/[0-9a-f-]{36}$`));
    const body = await res.text();
    const f = frames(body);
    assert.deepEqual(
      f.map((x) => [x.event, x.id]),
      [
        ["metadata", "0"],
        ["updates", "1"],
      ],
    );
    assert.match(body, /data: }\nid: 0\n\nevent: updates\n/);

    const wait = await post(`${server.url}/runs/wait`, {
      assistant_id: "echo",
      input: hi,
      multitask_strategy: null,
      if_not_exists: null,
      checkpoint: null,
      checkpoint_id: null,
    });
    assert.equal(wait.status, 200);
    assert.equal(wait.headers.get("content-type"), "text/plain; charset=UTF-8");
    assert.match(wait.headers.get("content-location")!, /^\/runs\/[0-9a-f-]{36}$/);
    const text = await wait.text();
    assert.ok(text.startsWith('{\n  "messages": [\n'));
    const values = JSON.parse(text);
    assert.deepEqual(
      values.messages.map((m: { type: string; content: string }) => [m.type, m.content]),
      [
        ["human", "hi"],
        ["ai", "echo: hi"],
      ],
    );
  });

  test("errors: failing graph, bad messages, unknown assistant, malformed body", async (t) => {
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const failing = frames(
      await (
        await post(`${server.url}/runs/stream`, { assistant_id: "fails", input: hi, stream_mode: "updates" })
      ).text(),
    );
    assert.deepEqual(
      failing.map((x) => x.event),
      ["metadata", "error"],
    );
    assert.deepEqual(failing[1].data, { error: "Error", message: "the graph failed on purpose" });
    const waitErr = await post(`${server.url}/runs/wait`, { assistant_id: "fails", input: hi });
    assert.equal(waitErr.status, 200);
    assert.deepEqual(await waitErr.json(), { __error__: { error: "Error", message: "the graph failed on purpose" } });

    const bogus = frames(
      await (
        await post(`${server.url}/runs/stream`, {
          assistant_id: "echo",
          input: { messages: [{ content: "hi", type: "bogus" }] },
        })
      ).text(),
    );
    assert.equal(bogus.at(-1)!.event, "error");
    assert.match(bogus.at(-1)!.data.message, /Unable to coerce message from array/);

    const missing = await post(`${server.url}/runs/wait`, { assistant_id: "nope", input: hi });
    assert.equal(missing.status, 404);
    assert.equal(missing.headers.get("content-type"), "text/plain;charset=UTF-8");
    const captured404 = fs.readFileSync(path.join(WIRE, "wait_404.txt"), "utf8").split(/\r?\n\r?\n/)[1];
    assert.equal(await missing.text(), captured404.trim());

    const noAssistant = await post(`${server.url}/runs/wait`, { input: hi });
    assert.equal(noAssistant.status, 422);
    assert.deepEqual(await noAssistant.json(), {
      detail: [{ loc: ["body", "assistant_id"], msg: "Field required", type: "missing" }],
    });
    const badJson = await fetch(`${server.url}/runs/stream`, { method: "POST", body: "{not json" });
    assert.equal(badJson.status, 422);
    assert.equal((await badJson.json()).detail[0].type, "json_invalid");
    const badMode = await post(`${server.url}/runs/stream`, { assistant_id: "echo", stream_mode: "everything" });
    assert.equal(badMode.status, 422);
    const badThread = await fetch(`${server.url}/threads/not-a-uuid`);
    assert.equal(badThread.status, 422);
    const unknownThread = await fetch(`${server.url}/threads/00000000-0000-4000-8000-000000000000`);
    assert.equal(unknownThread.status, 404);
  });

  test("without a custom auth handler a platform API key is required", async (t) => {
    const server = await startTestAgentServer(t, { project: ECHO_EXAMPLE });
    if (!server) return;
    assert.equal((await fetch(`${server.url}/ok`)).status, 200);
    const none = await post(`${server.url}/runs/wait`, { assistant_id: "echo", input: hi });
    assert.equal(none.status, 401);
    const bad = await fetch(`${server.url}/runs/wait`, {
      method: "POST",
      headers: { "x-api-key": "wharf_nope" },
      body: JSON.stringify({ assistant_id: "echo", input: hi }),
    });
    assert.equal(bad.status, 401);
    const result = (await server.client().runs.wait(null, "echo", { input: hi })) as {
      messages: Array<{ content: string }>;
    };
    assert.equal(result.messages[1].content, "echo: hi");
  });
});
