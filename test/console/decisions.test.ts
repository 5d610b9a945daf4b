import assert from "node:assert/strict";
import { test } from "node:test";
import { cleanProxyConfig, filterAudit, FORM_PATHS, issuesUnder, messagesAt, parseListing, parseSecrets, type AuditEntry } from "../../console/src/decisions.ts";

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
    ["rules.0.headers.1.name", "bad name"],
    ["rules.0.headers.0.name", null],
    ["rules.0.match_hosts", "2: bad glob"],
    ["access_control", "one of"],
    ["no_proxy", null],
    ["rules.0.headers", "1.name: bad name"],
  ];
  for (const [path, want] of table) assert.equal(messagesAt(issues, path), want, path);
  assert.deepEqual(issues.filter((i) => !FORM_PATHS.test(i.path)).map((i) => i.path), ["callbacks.0.ttl_seconds"], "only what the form cannot show is listed apart");
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
    ["cloud rule untouched", { rules: [{ name: "aws", type: "cloud_a", cloud_a: { x: 1 } }] }, { rules: [{ name: "aws", type: "cloud_a", cloud_a: { x: 1 } }] }],
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
  assert.deepEqual(out.map((e) => [e.kind, e.name, e.size]), [["d", "zdir", 4096], ["f", "a\tb", 1], ["f", "b.txt", 12]]);
});

test("egress log filters: host, rule, time window", () => {
  const now = Date.parse("2026-01-01T12:00:00Z");
  const e = (host: string, rule: string | null, minutesAgo: number): AuditEntry => ({
    id: `${host}${minutesAgo}`, at: "", last_at: new Date(now - minutesAgo * 60_000).toISOString(), count: 1, kind: "inject", decision: "allow", rule, host, port: 443, method: "GET", path: "/", status: 200,
  });
  const rows = [e("api.test", "gh", 1), e("other.test", null, 30), e("api.test", "GitHub-2", 300)];
  const table: Array<[{ host: string; rule: string; minutes: number }, string[]]> = [
    [{ host: "", rule: "", minutes: 0 }, ["api.test1", "other.test30", "api.test300"]],
    [{ host: " API.test ", rule: "", minutes: 0 }, ["api.test1", "api.test300"]],
    [{ host: "", rule: "github", minutes: 0 }, ["api.test300"]],
    [{ host: "", rule: "", minutes: 60 }, ["api.test1", "other.test30"]],
    [{ host: "api", rule: "gh", minutes: 5 }, ["api.test1"]],
  ];
  for (const [f, want] of table) assert.deepEqual(filterAudit(rows, f, now).map((r) => r.id), want, JSON.stringify(f));
});
