import assert from "node:assert/strict";
import { test } from "node:test";
import {
  cleanProxyConfig,
  filterAudit,
  FORM_PATHS,
  issuesUnder,
  messagesAt,
  parseListing,
  parseSecrets,
  type AuditEntry,
} from "../../console/src/decisions.ts";

test("422 items land at the input their loc names", () => {
  const items = [
    { loc: ["body", "proxy_config", "rules", 0, "headers", 1, "name"], msg: "bad name", type: "value_error" },
    { loc: ["body", "proxy_config", "rules", 0, "match_hosts", 2], msg: "bad glob", type: "value_error" },
    { loc: ["body", "proxy_config", "access_control"], msg: "one of", type: "value_error" },
    { loc: ["body", "proxy_config", "callbacks", 0, "ttl_seconds"], msg: "60..3600", type: "value_error" },
    { loc: ["body", "name"], msg: "taken", type: "value_error" },
  ];
  const issues = issuesUnder(items, ["body", "proxy_config"]);
  assert.equal(issues.length, 4);
  const table: Array<[string, string | null]> = [
    ["rules.0.headers.1.name", "Bad name"],
    ["rules.0.headers.0.name", null],
    ["rules.0.match_hosts", "Item 3: Bad glob"],
    ["access_control", "One of"],
    ["no_proxy", null],
    ["rules.0.headers", "Item 2, name: Bad name"],
  ];
  for (const [path, want] of table) assert.equal(messagesAt(issues, path), want, path);
  assert.deepEqual(
    issues.filter((i) => !FORM_PATHS.test(i.path)).map((i) => i.path),
    ["callbacks.0.ttl_seconds"],
    "only what the form cannot show is listed apart",
  );
});

test("the proxy_config editor sends only what was set, never a write-only marker", () => {
  const table: Array<[string, Parameters<typeof cleanProxyConfig>[0], ReturnType<typeof cleanProxyConfig>]> = [
    ["untouched", {}, null],
    ["empty parts", { rules: [], callbacks: [], no_proxy: [], access_control: null }, null],
    ["access control without a list", { access_control: {} }, null],
    ["allow list kept", { access_control: { allow_list: ["a.test"] } }, { access_control: { allow_list: ["a.test"] } }],
    [
      "is_set dropped",
      { rules: [{ name: "r", match_hosts: ["a.test"], headers: [{ name: "X", type: "opaque", is_set: true }] }] },
      { rules: [{ name: "r", match_hosts: ["a.test"], headers: [{ name: "X", type: "opaque" }] }] },
    ],
    [
      "cloud rule untouched",
      { rules: [{ name: "aws", type: "cloud_a", cloud_a: { x: 1 } }] },
      { rules: [{ name: "aws", type: "cloud_a", cloud_a: { x: 1 } }] },
    ],
  ];
  for (const [name, input, want] of table) assert.deepEqual(cleanProxyConfig(input), want, name);
});

test("deployment secrets: NAME=value sets, a bare NAME keeps, blank lines ignored", () => {
  assert.deepEqual(parseSecrets("A=1\n\n  B  \nC=x=y\nD="), [
    { name: "A", value: "1" },
    { name: "B", value: null },
    { name: "C", value: "x=y" },
    { name: "D", value: "" },
  ]);
});

test("file listings: folders first, names with tabs kept", () => {
  const out = parseListing("f\t12\t1700000000.5\tb.txt\nd\t4096\t1700000000\tzdir\nf\t1\t1\ta\tb\n\n");
  assert.deepEqual(
    out.map((e) => [e.kind, e.name, e.size]),
    [
      ["d", "zdir", 4096],
      ["f", "a\tb", 1],
      ["f", "b.txt", 12],
    ],
  );
});

test("egress log filters: host, rule, time window", () => {
  const now = Date.parse("2026-01-01T12:00:00Z");
  const e = (host: string, rule: string | null, minutesAgo: number): AuditEntry => ({
    id: `${host}${minutesAgo}`,
    at: "",
    last_at: new Date(now - minutesAgo * 60_000).toISOString(),
    count: 1,
    kind: "inject",
    decision: "allow",
    rule,
    host,
    port: 443,
    method: "GET",
    path: "/",
    status: 200,
  });
  const rows = [e("api.test", "gh", 1), e("other.test", null, 30), e("api.test", "GitHub-2", 300)];
  const table: Array<[{ host: string; rule: string; minutes: number }, string[]]> = [
    [{ host: "", rule: "", minutes: 0 }, ["api.test1", "other.test30", "api.test300"]],
    [{ host: " API.test ", rule: "", minutes: 0 }, ["api.test1", "api.test300"]],
    [{ host: "", rule: "github", minutes: 0 }, ["api.test300"]],
    [{ host: "", rule: "", minutes: 60 }, ["api.test1", "other.test30"]],
    [{ host: "api", rule: "gh", minutes: 5 }, ["api.test1"]],
  ];
  for (const [f, want] of table)
    assert.deepEqual(
      filterAudit(rows, f, now).map((r) => r.id),
      want,
      JSON.stringify(f),
    );
});

test("first-time-user wording: thread titles, times, status case, sources, API messages", async () => {
  const {
    deploymentState,
    humanMessage,
    humanPath,
    listItemAdvice,
    relativeTime,
    sourceLabel,
    statusLabel,
    threadTitle,
  } = await import("../../console/src/decisions.ts");
  const titles: Array<[unknown, string]> = [
    [{ messages: [{ type: "human", content: "What is six times seven?" }] }, "What is six times seven?"],
    [
      {
        messages: [
          { type: "ai", content: "hi" },
          { type: "human", content: [{ type: "text", text: "multi\npart" }] },
        ],
      },
      "multi part",
    ],
    [{ messages: [{ role: "user", content: "x".repeat(60) }] }, "x".repeat(39) + "…"],
    [{ topic: "whales", notes: [] }, "whales"],
    [{}, "New thread"],
    [null, "New thread"],
  ];
  for (const [values, want] of titles) assert.equal(threadTitle(values), want, JSON.stringify(values));
  const now = Date.parse("2026-01-01T12:00:00Z");
  const times: Array<[string, string]> = [
    ["2026-01-01T11:59:58Z", "now"],
    ["2026-01-01T11:55:00Z", "5 minutes ago"],
    ["2026-01-01T10:00:00Z", "2 hours ago"],
    ["2025-12-31T12:00:00Z", "yesterday"],
    ["2026-01-03T12:00:00Z", "in 2 days"],
  ];
  for (const [iso, want] of times) assert.equal(relativeTime(iso, now, "en"), want, iso);
  assert.equal(statusLabel("DEPLOY_FAILED"), "Deploy failed");
  assert.equal(statusLabel("ready"), "Ready");
  const states: Array<[string, { status: string } | null, boolean, { status: string; note: string | null }]> = [
    ["READY", { status: "BUILDING" }, false, { status: "BUILDING", note: null }],
    ["READY", { status: "DEPLOYING" }, false, { status: "DEPLOYING", note: null }],
    ["READY", { status: "BUILD_FAILED" }, false, { status: "BUILD_FAILED", note: "nothing is serving" }],
    ["READY", { status: "DEPLOYED" }, true, { status: "READY", note: null }],
    ["READY", { status: "BUILDING" }, true, { status: "READY", note: "updating: new revision building" }],
    ["READY", { status: "BUILD_FAILED" }, true, { status: "READY", note: "latest revision: build failed" }],
    ["READY", null, false, { status: "READY", note: null }],
  ];
  for (const [status, latest, active, want] of states)
    assert.deepEqual(deploymentState(status, latest, active), want, `${latest?.status} active=${active}`);
  assert.equal(sourceLabel("internal_source"), "Uploaded project");
  assert.equal(sourceLabel("github", "https://git.test/a.git"), "https://git.test/a.git");
  assert.equal(humanMessage("Value error, invalid CIDR"), "Invalid CIDR");
  assert.equal(humanPath("allow_list.0"), "line 1");
  assert.equal(humanPath("proxy_config.rules.0.headers.1.name"), "proxy config, rule 1, header 2, name");
  assert.match(listItemAdvice("https://api.example.com/v1")!, /write the host alone, like api\.example\.com/);
  assert.equal(listItemAdvice("api.example.com"), null);
});
