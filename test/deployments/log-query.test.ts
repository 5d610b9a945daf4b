import assert from "node:assert/strict";
import { test } from "node:test";
import { filterOf, projectLogsBody } from "../../src/deployments/api/project-log-routes.ts";
import { containsPattern, nextOffset } from "../../src/deployments/store/log-query.ts";
import { startDeploymentsPlatform } from "./support.ts";

test("containsPattern: the query matches literally, any case", () => {
  const rows: Array<[string, string]> = [
    ["loading", "%loading%"],
    ["DEPLOYED: Serving", "%deployed: serving%"],
    ["100%", "%100\\%%"],
    ["a_b", "%a\\_b%"],
    ["C:\\x", "%c:\\\\x%"],
  ];
  for (const [q, want] of rows) assert.equal(containsPattern(q), want, q);
});

test("nextOffset: the last line's id, null only on an empty page (the CLIs keep their cursor on null)", () => {
  const line = (id: string) => ({ id, timestamp: "2026-01-01T00:00:00.000Z", level: "info", message: id });
  assert.equal(nextOffset([line("a"), line("b")]), "b");
  assert.equal(nextOffset([]), null);
});

test("the CLIs' log body: filters read, unknown fields ignored, bad times are 422", () => {
  const body = projectLogsBody.parse({ limit: 5, order: "desc", level: "ERROR", query: "boom", start_time: "2026-03-08T00:00:00Z", extra: 1 });
  assert.deepEqual(filterOf(body), { level: "ERROR", query: "boom", since: "2026-03-08T00:00:00.000Z", until: undefined });
  assert.deepEqual(filterOf(projectLogsBody.parse({ query: "" })), { level: undefined, query: undefined, since: undefined, until: undefined });
  assert.equal(projectLogsBody.safeParse({ start_time: "yesterday" }).success, false);
});

test("POST /v1/projects/{id}/deploy_logs: 404 for an unknown project, 422 with detail for a bad filter", async (t) => {
  const p = (await startDeploymentsPlatform(t))!;
  const id = "01a2176b-9785-76f1-809f-91f170a0666d";
  let res = await p.api(`/v1/projects/${id}/deploy_logs`, { method: "POST", json: { limit: 10 } });
  assert.equal(res.status, 404);
  res = await p.api(`/v1/projects/${id}/deploy_logs`, { method: "POST", json: { end_time: "not a time" } });
  assert.equal(res.status, 422);
  const body = await res.json();
  assert.deepEqual(body.detail[0].loc, ["body", "end_time"]);
});
