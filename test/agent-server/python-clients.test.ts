import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { after, test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { runPythonClient, sdkPython } from "../support/python-client.ts";
import { pythonAvailable, requireCapability, TEST_PYTHON_ENVS } from "../support/requirements.ts";
import { sharedAgentServer } from "./support.ts";

process.env.WHARF_PYTHON_ENVS = TEST_PYTHON_ENVS;
const here = import.meta.dirname;
const TEMPLATE = path.join(here, "fixtures/python-template");
const MIXED = path.join(here, "fixtures/python-mixed");
const WHARF = path.resolve(here, "../../bin/wharf.js");
const EXPECTED = { changeme: "output from call_model. Configured with x" };
// The tests over Python graphs each use threads, runs, assistants and store items of their own: one
// server for them all.
const mixed = sharedAgentServer({ project: MIXED });
after(() => mixed.close());

const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
    s.on("error", reject);
  });

async function waitFor<T>(what: string, fn: () => Promise<T | null>, timeoutMs = 180_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => null);
    if (v !== null) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 300));
  }
}

test("wharf dev serves the official new-langgraph-project template: Python client (sync and async), JS client, reload on a .py change", async (t) => {
  if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python projects")) return;
  const python = await sdkPython();
  // A fixed folder: the project is installed editable, so its cached environment is tied to its path.
  const dir = path.join(os.tmpdir(), "wharf-test-python-template");
  fs.rmSync(dir, { recursive: true, force: true });
  fs.cpSync(TEMPLATE, dir, { recursive: true });
  const port = await freePort();
  const url = `http://127.0.0.1:${port}`;
  const output: string[] = [];
  const dev = spawn(process.execPath, [WHARF, "dev", dir, "--port", String(port)], {
    env: { ...process.env, WHARF_HOME: path.join(dir, ".wharf"), WHARF_LOG_LEVEL: "warn" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  dev.stdout.on("data", (c: Buffer) => output.push(c.toString()));
  dev.stderr.on("data", (c: Buffer) => output.push(c.toString()));
  t.after(async () => {
    const exited = new Promise((r) => dev.once("exit", r));
    dev.kill("SIGTERM");
    await exited;
    // The agent server the dev command started stops on its own SIGTERM; give it a moment.
    await waitFor(
      "the server to stop",
      async () =>
        (await fetch(`${url}/ok`).then(
          () => true,
          () => false,
        ))
          ? null
          : true,
      20_000,
    ).catch(() => {});
  });
  await waitFor("wharf dev to serve", async () => ((await fetch(`${url}/ok`)).ok ? true : null)).catch((err) => {
    throw new Error(`${(err as Error).message}\n${output.join("")}`);
  });

  const out = await runPythonClient(python, path.join(here, "python-client/template_flows.py"), [url]);
  assert.match(out, /^ok sync=\d+ async=\d+/m);

  // The JS SDK against the same Python project.
  const js = new Client({ apiUrl: url, apiKey: null, callerOptions: { maxRetries: 0 } });
  assert.deepEqual(
    await js.runs.wait(null, "agent", { input: { changeme: "hi" }, context: { my_configurable_param: "x" } }),
    EXPECTED,
  );
  const [assistant] = await js.assistants.search();
  assert.equal(assistant.name, "New Graph");

  // Editing the graph restarts the server, which serves the new code.
  const graphFile = path.join(dir, "src/agent/graph.py");
  fs.writeFileSync(
    graphFile,
    fs.readFileSync(graphFile, "utf8").replace('"output from call_model. "', '"edited output. "'),
  );
  const edited = await waitFor(
    "the reloaded graph",
    async () => {
      const v = (await js.runs.wait(null, "agent", {
        input: { changeme: "hi" },
        context: { my_configurable_param: "x" },
      })) as { changeme: string };
      return v.changeme.startsWith("edited") ? v : null;
    },
    120_000,
  );
  assert.deepEqual(edited, { changeme: "edited output. Configured with x" });
});

test("the Python client drives interrupts, Command resume, subgraph and token streams of Python graphs (sync and async)", async (t) => {
  if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python projects")) return;
  const python = await sdkPython();
  const server = await mixed.get(t);
  if (!server) return;
  const out = await runPythonClient(python, path.join(here, "python-client/hitl_flows.py"), [server.url], {
    WHARF_TEST_API_KEY: server.apiKey!,
  });
  assert.match(out, /^ok$/m);
});

test("the Python client (sync and async) over Python graphs: assistants, threads, every stream mode with subgraphs, join_stream from last_event_id, HITL, cancel, crons, store", async (t) => {
  if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python projects")) return;
  const python = await sdkPython();
  const server = await mixed.get(t);
  if (!server) return;
  const out = await runPythonClient(python, path.join(here, "python-client/client_flows.py"), [server.url], {
    WHARF_TEST_API_KEY: server.apiKey!,
  });
  assert.match(out, /^ok$/m);
});

test("the JS SDK over Python graphs: streams with subgraphs, state, interrupt and Command resume", async (t) => {
  if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python projects")) return;
  const server = await mixed.get(t);
  if (!server) return;
  const js = server.client();
  const events: Array<{ event: string; data: unknown }> = [];
  for await (const part of js.runs.stream(null, "nested", {
    input: { n: 1 },
    streamMode: ["values", "updates", "messages-tuple"],
    streamSubgraphs: true,
  }))
    events.push(part as { event: string; data: unknown });
  assert.equal(events[0].event, "metadata");
  assert.ok(
    events.some((e) => e.event.startsWith("updates|inner:")),
    JSON.stringify(events.map((e) => e.event)),
  );
  assert.deepEqual([events.at(-1)?.event, events.at(-1)?.data], ["values", { n: 4 }]);

  const tokens: string[] = [];
  for await (const part of js.runs.stream(null, "chat", {
    input: { messages: [{ role: "human", content: "hi" }] },
    streamMode: "messages-tuple",
  })) {
    if (part.event === "messages") tokens.push((part.data as unknown as [{ content: string }, unknown])[0].content);
  }
  assert.equal(tokens.join(""), "hello there");

  const thread = await js.threads.create();
  const first = (await js.runs.wait(thread.thread_id, "ask", { input: { question: "ship?" } })) as {
    __interrupt__: Array<{ value: unknown; id: string }>;
  };
  assert.deepEqual(first.__interrupt__[0].value, { question: "ship?" });
  const state = await js.threads.getState(thread.thread_id);
  assert.deepEqual(state.next, ["ask"]);
  assert.deepEqual((state.tasks[0].interrupts as Array<{ value: unknown }>)[0].value, { question: "ship?" });
  assert.equal((await js.threads.get(thread.thread_id)).status, "interrupted");
  const resumed: unknown[] = [];
  for await (const part of js.runs.stream(thread.thread_id, "ask", {
    command: { resume: "yes" },
    streamMode: "values",
  }))
    if (part.event === "values") resumed.push(part.data);
  assert.deepEqual(resumed.at(-1), { question: "ship?", answer: "you said yes" });
  const history = await js.threads.getHistory(thread.thread_id);
  assert.deepEqual(history[0].values, { question: "ship?", answer: "you said yes" });
});
