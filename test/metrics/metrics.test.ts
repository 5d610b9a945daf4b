import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { test } from "node:test";
import { createAgentServerFeature } from "../../src/agent-server/index.ts";
import { createDeploymentsFeature } from "../../src/deployments/feature.ts";
import { operatorAuthorized } from "../../src/metrics/index.ts";
import { routeOf } from "../../src/http/http-metrics.ts";
import { buildDurations } from "../../src/metrics/state-collectors.ts";
import { createMetricsFeature } from "../../src/metrics/index.ts";
import { allFeatures } from "../../src/platform/features.ts";
import { FAKE_RUNNER, FAST, FIXTURES, copyProject, pollRevision } from "../deployments/support.ts";
import { startTestPlatform } from "../support/platform.ts";

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
// A real Prometheus text-format parser (it throws on malformed exposition).
const parsePrometheus = createRequire(import.meta.url)("parse-prometheus-text-format") as (text: string) => Family[];

const TOKEN = "metrics-operator-token-0123456789";

test("routeOf: the matched pattern, never the raw path", () => {
  assert.equal(
    routeOf([
      { path: "*", method: "ALL" },
      { path: "/v2/deployments/:deployment_id", method: "GET" },
    ]),
    "/v2/deployments/:deployment_id",
  );
  assert.equal(routeOf([{ path: "*", method: "ALL" }]), "unmatched");
});

test("buildDurations: entered BUILDING → left it, per revision", () => {
  const rows = [
    { revision_id: "a", from_status: "AWAITING_BUILD", to_status: "BUILDING", at: "2026-01-01T00:00:00.000Z" },
    { revision_id: "b", from_status: "AWAITING_BUILD", to_status: "BUILDING", at: "2026-01-01T00:00:01.000Z" },
    { revision_id: "a", from_status: "BUILDING", to_status: "AWAITING_DEPLOY", at: "2026-01-01T00:00:12.500Z" },
    { revision_id: "c", from_status: "BUILDING", to_status: "BUILD_FAILED", at: "2026-01-01T00:00:13.000Z" },
  ];
  assert.deepEqual(buildDurations(rows), [12.5]);
});

test("operatorAuthorized: only the operator's bearer token", () => {
  const rows: Array<[string | undefined, boolean]> = [
    [`Bearer ${TOKEN}`, true],
    [`bearer ${TOKEN}`, true],
    [undefined, false],
    ["Bearer nope", false],
    [TOKEN, false],
    [`Basic ${TOKEN}`, false],
  ];
  for (const [h, want] of rows) assert.equal(operatorAuthorized(h, TOKEN), want, String(h));
});

test("GET /metrics: off without the setting; behind the operator token; a scrape a Prometheus parser reads", async (t) => {
  const features = allFeatures().filter((f) => f.name === "identity" || f.name === "secrets");
  const off = (await startTestPlatform(t, { features: [...features, createMetricsFeature()] }))!;
  assert.equal((await fetch(`${off.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } })).status, 404);

  const agent = createAgentServerFeature();
  const p = (await startTestPlatform(t, {
    features: [...features, createDeploymentsFeature({ ...FAST, ...FAKE_RUNNER }), agent, createMetricsFeature()],
    env: {
      WHARF_METRICS_TOKEN: TOKEN,
      WHARF_AGENT_PROJECT: path.join(FIXTURES, "projects", "echo"),
      WHARF_AGENT_PORT: "0",
    },
  }))!;
  assert.equal((await fetch(`${p.url}/metrics`)).status, 401);
  assert.equal(
    (await fetch(`${p.url}/metrics`, { headers: { "x-api-key": p.apiKey } })).status,
    401,
    "a workspace key is not the operator's",
  );
  assert.equal(
    (await fetch(`${p.url}/metrics`, { headers: { authorization: "Bearer wrong-token-wrong-token" } })).status,
    401,
  );

  const res = await p.api("/v2/deployments", {
    method: "POST",
    json: {
      name: "metered",
      source: "internal_source",
      source_config: {},
      source_revision_config: { langgraph_config_path: "langgraph.json", local_path: copyProject(t, "echo") },
      secrets: [],
    },
  });
  assert.equal(res.status, 201);
  const d = await res.json();
  assert.equal((await pollRevision(p, d.id, d.latest_revision_id, 180_000)).status, "DEPLOYED");
  await p.api(`/v2/deployments/${d.id}`);
  // Runs of the control plane's agent server: a stateless one (its row is gone once it ends) and a thread's.
  const run = (path: string) =>
    fetch(`${agent.url()}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": p.apiKey },
      body: JSON.stringify({ assistant_id: "echo", input: { messages: [{ role: "human", content: "hi" }] } }),
    });
  const stateless = await run("/runs/wait");
  assert.equal(stateless.status, 200, await stateless.text());
  const thread = await (
    await fetch(`${agent.url()}/threads`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": p.apiKey },
      body: "{}",
    })
  ).json();
  assert.equal((await run(`/threads/${thread.thread_id}/runs/wait`)).status, 200);
  await p.api(`/v2/deployments/01a2176b-9785-76f1-809f-91f170a0666d`);

  const scrape = await fetch(`${p.url}/metrics`, { headers: { authorization: `Bearer ${TOKEN}` } });
  assert.equal(scrape.status, 200);
  assert.match(scrape.headers.get("content-type") ?? "", /^text\/plain; version=0\.0\.4/);
  const text = await scrape.text();
  const families = new Map(parsePrometheus(text).map((f) => [f.name, f]));
  const value = (name: string, labels: Record<string, string>) =>
    families.get(name)?.metrics.find((m) => Object.entries(labels).every(([k, v]) => m.labels?.[k] === v))?.value;

  assert.equal(families.get("wharf_deployment_revisions")?.type, "GAUGE");
  assert.equal(value("wharf_deployment_revisions", { status: "DEPLOYED" }), "1");
  const builds = families.get("wharf_deployment_build_duration_seconds");
  assert.equal(builds?.type, "HISTOGRAM");
  assert.equal(builds?.metrics[0].count, "1");
  assert.equal(value("wharf_http_requests_total", { method: "POST", route: "/v2/deployments", status: "201" }), "1");
  assert.equal(
    value("wharf_http_requests_total", { method: "GET", route: "/v2/deployments/:deployment_id", status: "404" }),
    "1",
    "ids never become labels",
  );
  assert.ok(
    Number(
      value("wharf_http_requests_total", {
        method: "GET",
        route: "/v2/deployments/:deployment_id/revisions/:revision_id",
        status: "200",
      }),
    ) >= 1,
  );
  assert.equal(families.get("wharf_http_request_duration_seconds")?.type, "HISTOGRAM");
  // Tables of features this platform does not mount: the family is declared, with no series.
  assert.deepEqual(families.get("wharf_sandboxes")?.metrics ?? [], []);
  assert.ok(families.has("wharf_egress_decisions") && families.has("wharf_run_queue_depth"));
  const runs = families.get("wharf_run_duration_seconds");
  assert.equal(runs?.type, "HISTOGRAM");
  // The parser keeps a labelled histogram's buckets only (not its labels, sum and count): the
  // count is checked in the text as well.
  assert.equal(
    runs?.metrics[0]?.buckets?.["+Inf"],
    "2",
    `both runs, the stateless one included: ${JSON.stringify(runs)}`,
  );
  assert.match(text, /^wharf_run_duration_seconds_count\{status="success"\} 2$/m);
  assert.equal(value("wharf_runs", { status: "success" }), "1", "the thread's run row");
  assert.equal(value("wharf_run_queue_depth", { queue: "runs" }), "0");
});
