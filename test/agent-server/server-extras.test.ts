import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { runCountsByStatus } from "../../src/agent-server/api/metrics-routes.ts";
import { statusesToCancel } from "../../src/agent-server/api/run-cancel-routes.ts";
import { langGraphVersionProblem, SUPPORTED_LANGGRAPH } from "../../src/agent-server/project/langgraph-version.ts";
import { startAgentServer } from "../../src/agent-server/index.ts";
import { createLogger } from "../../src/log/logger.ts";
import { startTestAgentServer } from "./support.ts";

// The agent server's /metrics (parsed by a real Prometheus text parser), bulk cancel, its API
// description, and a project on an unsupported LangGraph line refused at load.
interface Sample {
  labels?: Record<string, string>;
  value?: string;
  count?: string;
  buckets?: Record<string, string>;
}
interface Family {
  name: string;
  type: string;
  metrics: Sample[];
}
const parsePrometheus = createRequire(import.meta.url)("parse-prometheus-text-format") as (text: string) => Family[];
const here = path.dirname(fileURLToPath(import.meta.url));
const AUTH_PROJECT = path.join(here, "fixtures/auth");
const say = (text: string) => ({ messages: [{ role: "human", content: text }] });

test("pure decisions: run counts list every status; bulk cancel statuses; supported LangGraph versions", () => {
  assert.deepEqual(
    Object.fromEntries(
      runCountsByStatus([
        { status: "success", n: "3" },
        { status: "pending", n: 2n },
      ]),
    ),
    { pending: 2, running: 0, success: 3, error: 0, timeout: 0, interrupted: 0 },
  );
  for (const [status, want] of [
    ["pending", ["pending"]],
    ["running", ["running"]],
    ["all", ["pending", "running"]],
    [undefined, ["pending", "running"]],
  ] as const) {
    assert.deepEqual(statusesToCancel(status), want);
  }
  for (const [version, ok] of [
    ["1.7.3", true],
    ["1.0.0", true],
    ["0.2.74", false],
    ["0.4.9", false],
    ["2.0.0", false],
    ["x", false],
  ] as const) {
    assert.equal(langGraphVersionProblem(version) === null, ok, version);
  }
  assert.match(
    langGraphVersionProblem("0.2.74")!,
    new RegExp(`0\\.2\\.74 is not supported; this server runs ${SUPPORTED_LANGGRAPH.replace(/[.<>=]/g, "\\$&")}`),
  );
});

describe("agent server endpoints", () => {
  test("/metrics: runs by status, queue depth, run duration histogram, HTTP by route pattern and status", async (t) => {
    const server = await startTestAgentServer(t, { open: true });
    if (!server) return;
    const client = server.client();
    await client.runs.wait(null, "echo", { input: say("one") });
    await client.runs.wait(null, "fails", { input: say("two"), raiseError: false });
    const thread = await client.threads.create();
    await client.runs.create(thread.thread_id, "echo", { input: say("later"), afterSeconds: 30 });
    await client.threads.get(crypto.randomUUID()).catch(() => {});
    const res = await fetch(`${server.url}/metrics`);
    assert.equal(res.status, 200);
    assert.match(res.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
    const families = new Map(parsePrometheus(await res.text()).map((f) => [f.name, f]));
    const value = (name: string, labels: Record<string, string> = {}) =>
      families.get(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))?.value;
    assert.equal(families.get("wharf_agent_runs")?.type, "GAUGE");
    assert.equal(value("wharf_agent_runs", { status: "pending" }), "1");
    assert.equal(value("wharf_agent_run_queue_depth"), "1");
    const durations = families.get("wharf_agent_run_duration_seconds")!;
    assert.equal(durations.type, "HISTOGRAM");
    assert.equal(durations.metrics[0].count, "2");
    assert.equal(durations.metrics[0].buckets?.["+Inf"], "2");
    assert.equal(value("wharf_agent_runs_ended_total", { status: "success" }), "1");
    assert.equal(value("wharf_agent_runs_ended_total", { status: "error" }), "1");
    assert.equal(value("wharf_agent_http_requests_total", { method: "POST", route: "/runs/wait", status: "200" }), "2");
    assert.equal(
      value("wharf_agent_http_requests_total", { method: "GET", route: "/threads/:thread_id", status: "404" }),
      "1",
    );
  });

  test("/metrics is behind the project's custom auth", async (t) => {
    const server = await startTestAgentServer(t, { project: AUTH_PROJECT });
    if (!server) return;
    assert.equal((await fetch(`${server.url}/metrics`)).status, 401);
    assert.equal(
      (await fetch(`${server.url}/metrics`, { headers: { authorization: "Bearer user-alice" } })).status,
      200,
    );
  });

  test("POST /runs/cancel cancels by ids or by status, only the caller's; a bad body is a 422", async (t) => {
    const server = await startTestAgentServer(t, { project: AUTH_PROJECT });
    if (!server) return;
    const alice = server.client({ authorization: "Bearer user-alice" });
    const bob = server.client({ authorization: "Bearer user-bob" });
    const post = (token: string, body: unknown, query = "") =>
      fetch(`${server.url}/runs/cancel${query}`, {
        method: "POST",
        headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
        body: JSON.stringify(body),
      });
    const queued = async (client: typeof alice) => {
      const thread = await client.threads.create();
      return {
        thread,
        run: await client.runs.create(thread.thread_id, "echo", { input: say("later"), afterSeconds: 30 }),
      };
    };
    const a1 = await queued(alice);
    const a2 = await queued(alice);
    const b1 = await queued(bob);

    // Bob naming Alice's run changes nothing.
    assert.equal((await post("user-bob", { thread_id: a1.thread.thread_id, run_ids: [a1.run.run_id] })).status, 204);
    assert.equal((await alice.runs.get(a1.thread.thread_id, a1.run.run_id)).status, "pending");
    assert.equal((await post("user-alice", { thread_id: a1.thread.thread_id, run_ids: [a1.run.run_id] })).status, 204);
    assert.equal((await alice.runs.get(a1.thread.thread_id, a1.run.run_id)).status, "interrupted");
    assert.equal((await alice.threads.get(a1.thread.thread_id)).status, "idle");

    // By status: Alice's pending runs go, Bob's stays.
    assert.equal((await post("user-alice", { status: "pending" })).status, 204);
    assert.equal((await alice.runs.get(a2.thread.thread_id, a2.run.run_id)).status, "interrupted");
    assert.equal((await bob.runs.get(b1.thread.thread_id, b1.run.run_id)).status, "pending");
    // Rollback removes the run.
    assert.equal((await post("user-bob", { status: "all" }, "?action=rollback")).status, 204);
    await assert.rejects(bob.runs.get(b1.thread.thread_id, b1.run.run_id), /404/);

    for (const bad of [{}, { status: "done" }, { run_ids: ["x"] }, { status: "all", run_ids: [a1.run.run_id] }]) {
      const res = await post("user-alice", bad);
      assert.equal(res.status, 422, JSON.stringify(bad));
      assert.ok(Array.isArray(((await res.json()) as { detail: unknown }).detail));
    }
  });

  test("GET /openapi.json describes the API and /docs serves Swagger UI, both without credentials", async (t) => {
    const server = await startTestAgentServer(t, { project: AUTH_PROJECT });
    if (!server) return;
    const doc = (await (await fetch(`${server.url}/openapi.json`)).json()) as {
      openapi: string;
      paths: Record<string, Record<string, { requestBody?: unknown }>>;
    };
    assert.equal(doc.openapi, "3.1.0");
    for (const [p, m] of [
      ["/runs/cancel", "post"],
      ["/threads/{thread_id}/runs/stream", "post"],
      ["/assistants/{assistant_id}", "delete"],
      ["/mcp", "post"],
      ["/a2a/{assistant_id}", "post"],
    ])
      assert.ok(doc.paths[p]?.[m], `${m} ${p}`);
    assert.ok(doc.paths["/runs/wait"].post.requestBody);
    const page = await fetch(`${server.url}/docs`);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /swagger-ui-bundle\.js/);
    assert.equal((await fetch(`${server.url}/docs/swagger-ui-bundle.js`)).status, 200);
  });
});

test("a project on @langchain/langgraph 0.2 is refused at load with one line naming the supported range", async (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-lg02-"));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  // The layout of the original new-langgraphjs-project template: its own node_modules copy of LangGraph 0.2.
  fs.mkdirSync(path.join(dir, "node_modules/@langchain/langgraph"), { recursive: true });
  fs.writeFileSync(
    path.join(dir, "node_modules/@langchain/langgraph/package.json"),
    JSON.stringify({ name: "@langchain/langgraph", version: "0.2.74", type: "module" }),
  );
  fs.mkdirSync(path.join(dir, "src"));
  fs.writeFileSync(path.join(dir, "src/agent.ts"), 'throw new Error("must not be imported");\n');
  fs.writeFileSync(path.join(dir, "langgraph.json"), JSON.stringify({ graphs: { agent: "./src/agent.ts:graph" } }));
  await assert.rejects(
    startAgentServer({
      projectDir: dir,
      host: "127.0.0.1",
      port: 0,
      databaseUrl: null,
      home: path.join(dir, ".wharf"),
      open: true,
      log: createLogger({ level: "silent" }),
    }),
    (err: Error) => {
      assert.match(
        err.message,
        /^@langchain\/langgraph 0\.2\.74 is not supported; this server runs >=1\.0\.0 <2\.0\.0 \(npm install @langchain\/langgraph@\^1\) \(found .*node_modules\/@langchain\/langgraph\/package\.json\)$/,
      );
      assert.ok(!err.message.includes("\n"));
      return true;
    },
  );
});
