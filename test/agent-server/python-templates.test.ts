/**
 * The official Python templates `react-agent` and `memory-agent`, unchanged but for the store's
 * embeddings (see `offlineEmbeddings`; copies under fixtures/python-templates, see its README), served with their dependencies from PyPI and a fake
 * OpenAI-compatible model on loopback (`OPENAI_BASE_URL`), driven by the JS SDK.
 */
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, test, type TestContext } from "node:test";
import { startFakeOpenAi, type FakeReply } from "../support/fake-openai.ts";
import { pythonAvailable, requireCapability, TEST_PYTHON_ENVS } from "../support/requirements.ts";
import { collect, startTestAgentServer } from "./support.ts";

const TEMPLATES = path.resolve(import.meta.dirname, "fixtures/python-templates");
const PYTHON = process.env.WHARF_PYTHON || "python3";
process.env.WHARF_PYTHON_ENVS = TEST_PYTHON_ENVS;
const MODEL = "openai/gpt-4o-mini";

/**
 * uv on PATH (from PyPI, cached with the tests' environments): the templates' dependencies install
 * in seconds with it instead of minutes with pip, as `pip_installer: "auto"` picks it when present.
 */
function uvOnPath(): void {
  const tool = path.join(TEST_PYTHON_ENVS, "uv-tool");
  if (!fs.existsSync(path.join(tool, "bin", "uv")))
    execFileSync(PYTHON, ["-m", "pip", "install", "--quiet", "--target", tool, "uv"], { stdio: "pipe" });
  process.env.PATH = `${path.join(tool, "bin")}:${process.env.PATH}`;
}

/** The template at a stable path (its environment's key includes the path: cached across runs). */
function template(name: string): string {
  const dir = path.join(TEST_PYTHON_ENVS, "templates", name);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.cpSync(path.join(TEMPLATES, name), dir, { recursive: true });
  offlineEmbeddings(dir);
  return dir;
}

/**
 * The one change to a template: `openai:` store embeddings tokenise with tiktoken, which fetches
 * its encoding from a public host at first use, and tests reach no public host. Such an index
 * embeds with a local function of the same dimensions instead (the graph's code is unchanged).
 */
function offlineEmbeddings(dir: string): void {
  const file = path.join(dir, "langgraph.json");
  const cfg = JSON.parse(fs.readFileSync(file, "utf8")) as { store?: { index?: { embed?: string; dims?: number } } };
  const index = cfg.store?.index;
  if (!index?.embed?.startsWith("openai:")) return;
  fs.writeFileSync(
    path.join(dir, "offline_embed.py"),
    `def embed(texts):\n    return [[float(len(t) % 7 + 1)] + [0.0] * ${(index.dims ?? 1) - 1} for t in texts]\n`,
  );
  index.embed = "./offline_embed.py:embed";
  fs.writeFileSync(file, JSON.stringify(cfg, null, 2));
}

async function serve(
  t: TestContext,
  name: string,
  reply: (messages: Array<{ role: string; content?: unknown }>) => FakeReply,
) {
  if (
    !requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv and PyPI are needed for Python templates")
  )
    return null;
  uvOnPath();
  const model = await startFakeOpenAi(t, reply);
  // The worker gets the server's environment, as `langgraph dev` gives the graph its own.
  Object.assign(process.env, { OPENAI_BASE_URL: model.url, OPENAI_API_KEY: "sk-fake-loopback" });
  const server = await startTestAgentServer(t, { project: template(name) });
  assert.ok(server);
  return { server, client: server.client(), model };
}

const text = (m: { content?: unknown }) =>
  typeof m.content === "string" ? m.content : JSON.stringify(m.content ?? "");

describe("official Python templates with a fake OpenAI-compatible model on loopback", () => {
  test("react-agent answers through its tool-bound model, over wait and messages-tuple streaming", async (t) => {
    const answer = "The answer, from the loopback model.";
    const up = await serve(t, "react-agent", () => ({ content: answer }));
    if (!up) return;
    const { client, model } = up;
    const input = { messages: [{ role: "user", content: "What is Wharf?" }] };
    const out = (await client.runs.wait(null, "agent", { input, context: { model: MODEL } })) as {
      messages: Array<{ type: string; content: string }>;
    };
    assert.deepEqual(
      out.messages.map((m) => m.type),
      ["human", "ai"],
      JSON.stringify(out),
    );
    assert.equal(out.messages[1].content, answer);
    const req = model.requests.at(-1) as { model: string; tools?: Array<{ function: { name: string } }> };
    assert.equal(req.model, "gpt-4o-mini");
    assert.deepEqual(
      req.tools?.map((x) => x.function.name),
      ["search"],
      "the template's Tavily tool is bound",
    );

    const chunks = await collect(
      client.runs.stream(null, "agent", { input, context: { model: MODEL }, streamMode: ["messages-tuple", "values"] }),
    );
    const tokens = chunks
      .filter((c) => c.event === "messages")
      .map((c) => (c.data as [{ content: string }, unknown])[0].content);
    assert.equal(tokens.join(""), answer);
    assert.ok(tokens.length > 1, "streamed token by token");
  });

  test("memory-agent stores a memory with its tool into the server's Store, and reads back one put over HTTP", async (t) => {
    const up = await serve(t, "memory-agent", (messages) => {
      if (messages.some((m) => m.role === "tool")) return { content: "Noted." };
      return {
        toolCalls: [
          { name: "upsert_memory", args: { content: "User likes French", context: "said so in the first message" } },
        ],
      };
    });
    if (!up) return;
    const { client, model } = up;
    const thread = await client.threads.create();
    const context = { model: MODEL, user_id: "u1" };
    const out = (await client.runs.wait(thread.thread_id, "agent", {
      input: { messages: [{ role: "user", content: "I like French." }] },
      context,
    })) as { messages: Array<{ type: string; content: string }> };
    assert.deepEqual(
      out.messages.map((m) => m.type),
      ["human", "ai", "tool", "ai"],
      JSON.stringify(out),
    );
    assert.equal(out.messages.at(-1)!.content, "Noted.");
    const items = await client.store.searchItems(["memories", "u1"]);
    assert.deepEqual(
      items.items.map((i) => i.value),
      [{ content: "User likes French", context: "said so in the first message" }],
    );

    await client.store.putItem(["memories", "u1"], "boat", { content: "User owns a boat", context: "put over HTTP" });
    await client.runs.wait(thread.thread_id, "agent", {
      input: { messages: [{ role: "user", content: "What do you know?" }] },
      context,
    });
    const system = (model.requests.at(-1) as { messages: Array<{ role: string; content?: unknown }> }).messages.find(
      (m) => m.role === "system",
    );
    assert.ok(
      system && text(system).includes("User owns a boat"),
      `the graph's store.asearch did not see the item put over HTTP: ${system ? text(system) : "no system message"}`,
    );
  });
});
