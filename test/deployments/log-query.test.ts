import assert from "node:assert/strict";
import { test } from "node:test";
import { filterOf, projectLogsBody } from "../../src/deployments/api/project-log-routes.ts";
import { containsPattern, nextOffset } from "../../src/deployments/store/log-query.ts";
import { newId } from "../../src/store/ids.ts";
import { copyProject, startDeploymentsPlatform } from "./support.ts";

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
  const body = projectLogsBody.parse({
    limit: 5,
    order: "desc",
    level: "ERROR",
    query: "boom",
    start_time: "2026-03-08T00:00:00Z",
    extra: 1,
  });
  assert.deepEqual(filterOf(body), {
    level: "ERROR",
    query: "boom",
    since: "2026-03-08T00:00:00.000Z",
    until: undefined,
  });
  assert.deepEqual(filterOf(projectLogsBody.parse({ query: "" })), {
    level: undefined,
    query: undefined,
    since: undefined,
    until: undefined,
  });
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

/**
 * The `query` filter (`-q` of both CLIs) is a literal, case-insensitive substring on both stores:
 * SQLite's LIKE has no escape character unless told, PostgreSQL's default is the backslash.
 */
for (const dialect of ["sqlite", "postgres"] as const) {
  test(`POST /v1/projects/{id}/deploy_logs: query matches literally, any case, on ${dialect}`, async (t) => {
    const p = await startDeploymentsPlatform(t, { dialect });
    if (!p) return;
    const res = await p.api("/v2/deployments", {
      method: "POST",
      json: {
        name: `q-${dialect}`,
        source: "internal_source",
        source_config: {},
        source_revision_config: { langgraph_config_path: "langgraph.json", local_path: copyProject(t, "echo") },
        secrets: [],
      },
    });
    assert.equal(res.status, 201);
    const d = await res.json();
    const lines = [
      "Loading graphs",
      "disk 100% full",
      "disk 100 full",
      "name a_b here",
      "name axb here",
      "path C:\\x",
      "path C:x",
    ];
    const at = new Date().toISOString();
    await p.ctx.db
      .insertInto("deployment_revision_logs")
      .values(
        lines.map((message) => ({
          id: newId(),
          revision_id: d.latest_revision_id,
          kind: "deploy",
          level: "info",
          message,
          timestamp: at,
        })),
      )
      .execute();
    const rows: Array<[query: string, want: string[]]> = [
      ["LOADING GRAPHS", ["Loading graphs"]],
      ["100%", ["disk 100% full"]],
      ["a_b", ["name a_b here"]],
      ["C:\\x", ["path C:\\x"]],
      ["%", ["disk 100% full"]],
    ];
    for (const [query, want] of rows) {
      const page = await p.api(`/v1/projects/${d.id}/deploy_logs`, { method: "POST", json: { query, limit: 100 } });
      assert.equal(page.status, 200, query);
      const got = ((await page.json()) as { logs: Array<{ message: string }> }).logs
        .map((l) => l.message)
        .filter((m) => lines.includes(m));
      assert.deepEqual(got, want, `${dialect}: ${query}`);
    }
  });
}
