import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { Role, TaskState, type Part, type SendMessageRequest, type Task } from "@a2a-js/sdk";
import { LegacyJsonRpcTransport } from "@a2a-js/sdk/compat/v0_3/client";
import { startTestAgentServer } from "./support.ts";

// `/mcp` and `/a2a/{assistant_id}` driven by the official MCP TypeScript SDK client and the A2A
// JS SDK's v0.3 JSON-RPC client, on an open server and behind a project's custom auth.
const here = path.dirname(fileURLToPath(import.meta.url));
const AUTH_PROJECT = path.join(here, "fixtures/auth");

async function mcp(url: string, headers: Record<string, string> = {}): Promise<McpClient> {
  const client = new McpClient({ name: "wharf-test", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers } }));
  return client;
}

const textOf = (result: Record<string, unknown>) =>
  (result.content as Array<{ type: string; text?: string }>).map((c) => c.text ?? "").join("");

function userMessage(text: string, contextId = ""): SendMessageRequest {
  return {
    tenant: "",
    message: {
      messageId: crypto.randomUUID(),
      contextId,
      taskId: "",
      role: Role.ROLE_USER,
      parts: [{ content: { $case: "text", value: text }, metadata: undefined, filename: "", mediaType: "" } as Part],
      metadata: undefined,
      extensions: [],
      referenceTaskIds: [],
    },
    configuration: undefined,
    metadata: undefined,
  };
}

const partsText = (parts: Part[] | undefined) =>
  (parts ?? []).map((p) => (p.content?.$case === "text" ? String(p.content.value) : "")).join("");

describe("/mcp (Model Context Protocol, streamable HTTP)", () => {
  test("lists each assistant as a tool with its input schema, calls one, and streams progress per step", async (t) => {
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const client = await mcp(server.url);
    t.after(() => client.close());
    const { tools } = await client.listTools();
    const names = tools.map((x) => x.name).sort();
    assert.deepEqual(names, ["ask", "echo", "factory", "fails", "slow"]);
    const echo = tools.find((x) => x.name === "echo")!;
    assert.equal(echo.inputSchema.type, "object");
    assert.ok(
      echo.inputSchema.properties && "messages" in echo.inputSchema.properties,
      JSON.stringify(echo.inputSchema),
    );

    const result = await client.callTool({
      name: "echo",
      arguments: { messages: [{ role: "human", content: "hi mcp" }] },
    });
    assert.equal(result.isError, undefined);
    assert.equal(textOf(result), "echo: hi mcp");

    const progress: Array<{ progress: number; message?: string }> = [];
    const streamed = await client.callTool(
      { name: "slow", arguments: { messages: [{ role: "human", content: "sleep 50" }] } },
      undefined,
      { onprogress: (p) => progress.push(p) },
    );
    assert.equal(textOf(streamed), "done: sleep 50");
    assert.deepEqual(progress, [{ progress: 1, message: "work" }]);

    const failed = await client.callTool({ name: "fails", arguments: { messages: [{ role: "human", content: "x" }] } });
    assert.equal(failed.isError, true);
    assert.match(textOf(failed), /the graph failed on purpose/);
    const unknown = await client.callTool({ name: "nope", arguments: {} });
    assert.equal(unknown.isError, true);

    // Stateless: no server-initiated stream.
    assert.equal((await fetch(`${server.url}/mcp`)).status, 405);
  });

  test("behind the project's custom auth: no token is a 401, a user's call runs as that user", async (t) => {
    const server = await startTestAgentServer(t, { project: AUTH_PROJECT });
    if (!server) return;
    const res = await fetch(`${server.url}/mcp`, {
      method: "POST",
      headers: { "content-type": "application/json", accept: "application/json, text/event-stream" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    assert.equal(res.status, 401);
    await assert.rejects(mcp(server.url, { authorization: "Bearer nobody" }));
    const client = await mcp(server.url, { authorization: "Bearer user-alice" });
    t.after(() => client.close());
    assert.deepEqual((await client.listTools()).tools.map((x) => x.name).sort(), ["echo", "whoami"]);
    const result = await client.callTool({
      name: "whoami",
      arguments: { messages: [{ role: "human", content: "who" }] },
    });
    assert.match(textOf(result), /alice/);
  });
});

describe("/a2a/{assistant_id} (A2A v0.3 JSON-RPC)", () => {
  test("message/send answers a completed task; contextId continues the thread; tasks/get reads it back; message/stream streams the task", async (t) => {
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const card = (await (await fetch(`${server.url}/a2a/echo/.well-known/agent-card.json`)).json()) as {
      url: string;
      capabilities: { streaming: boolean };
      protocolVersion: string;
    };
    assert.equal(card.protocolVersion, "0.3.0");
    assert.equal(card.capabilities.streaming, true);
    const a2a = new LegacyJsonRpcTransport({ endpoint: card.url });

    const sent = await a2a.sendMessage(userMessage("hello a2a"));
    assert.ok("id" in sent && "artifacts" in sent, "a task");
    const task = sent as Task;
    assert.equal(task.status?.state, TaskState.TASK_STATE_COMPLETED);
    assert.equal(partsText(task.artifacts[0].parts), "echo: hello a2a");

    // The context is the thread: a second message runs on it.
    await a2a.sendMessage(userMessage("again", task.contextId));
    const thread = await server.client().threads.getState(task.contextId);
    assert.equal((thread.values as { messages: unknown[] }).messages.length, 4);

    const got = await a2a.getTask({ tenant: "", id: task.id });
    assert.equal(got.status?.state, TaskState.TASK_STATE_COMPLETED);
    assert.equal(got.contextId, task.contextId);
    await assert.rejects(a2a.getTask({ tenant: "", id: crypto.randomUUID() }), /not found/i);

    const kinds: string[] = [];
    let finalText = "";
    for await (const ev of a2a.sendMessageStream(userMessage("stream me"))) {
      kinds.push(ev.payload?.$case ?? "?");
      if (ev.payload?.$case === "artifactUpdate") finalText = partsText(ev.payload.value.artifact?.parts);
      if (ev.payload?.$case === "statusUpdate" && ev.payload.value.status?.state === TaskState.TASK_STATE_COMPLETED)
        break;
    }
    assert.deepEqual(kinds, ["task", "statusUpdate", "artifactUpdate", "statusUpdate"]);
    assert.equal(finalText, "echo: stream me");

    // An interrupt asks for input.
    const asked = (await new LegacyJsonRpcTransport({ endpoint: `${server.url}/a2a/ask` }).sendMessage(
      userMessage("deploy"),
    )) as Task;
    assert.equal(asked.status?.state, TaskState.TASK_STATE_INPUT_REQUIRED);
  });

  test("bad JSON-RPC is an error object, never a 500; behind custom auth another user's task is not found", async (t) => {
    const server = await startTestAgentServer(t, { project: AUTH_PROJECT });
    if (!server) return;
    const post = async (body: string, token = "user-alice", assistant = "echo") => {
      const res = await fetch(`${server.url}/a2a/${assistant}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body,
      });
      return { status: res.status, body: (await res.json().catch(() => null)) as { error?: { code: number } } | null };
    };
    assert.equal((await post("{")).body?.error?.code, -32700);
    assert.equal((await post(JSON.stringify({ id: 1, method: "message/send" }))).body?.error?.code, -32600);
    assert.equal((await post(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "nope" }))).body?.error?.code, -32601);
    assert.equal(
      (
        await post(
          JSON.stringify({
            jsonrpc: "2.0",
            id: 1,
            method: "message/send",
            params: { message: { role: "user", parts: [] } },
          }),
        )
      ).body?.error?.code,
      -32602,
    );
    assert.equal(
      (await post(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tasks/get", params: { id: "x" } }))).body?.error
        ?.code,
      -32602,
    );
    assert.equal(
      (await post(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tasks/get", params: {} }), "user-alice", "missing"))
        .status,
      404,
    );
    assert.equal((await fetch(`${server.url}/a2a/echo`, { method: "POST", body: "{}" })).status, 401);

    const alice = new LegacyJsonRpcTransport({
      endpoint: `${server.url}/a2a/whoami`,
      fetchImpl: (u, init) =>
        fetch(u, {
          ...init,
          headers: { ...(init?.headers as Record<string, string>), authorization: "Bearer user-alice" },
        }),
    });
    const bob = new LegacyJsonRpcTransport({
      endpoint: `${server.url}/a2a/whoami`,
      fetchImpl: (u, init) =>
        fetch(u, {
          ...init,
          headers: { ...(init?.headers as Record<string, string>), authorization: "Bearer user-bob" },
        }),
    });
    const task = (await alice.sendMessage(userMessage("who"))) as Task;
    assert.match(partsText(task.artifacts[0].parts), /alice/);
    assert.equal((await alice.getTask({ tenant: "", id: task.id })).id, task.id);
    await assert.rejects(bob.getTask({ tenant: "", id: task.id }), /not found/i);
    // Bob cannot continue Alice's thread either.
    await assert.rejects(bob.sendMessage(userMessage("me too", task.contextId)));
  });
});
