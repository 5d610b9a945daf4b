import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { createSandboxesFeature } from "../../src/sandboxes/feature.ts";
import { BASE_CACHE } from "../sandboxes/support.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { startEgressPlatform } from "./egress-support.ts";

type Issue = { loc: Array<string | number>; msg: string; type: string };

/** Bad proxy_configs: schema errors, cross-field errors, and what only the handler checks (a missing secret). */
const BAD: Array<{ what: string; proxy_config: unknown }> = [
  { what: "both lists", proxy_config: { access_control: { allow_list: ["a.test"], deny_list: ["b.test"] } } },
  { what: "neither list", proxy_config: { access_control: {} } },
  {
    what: "header rule without hosts or headers",
    proxy_config: { rules: [{ name: "x", match_hosts: [], headers: [] }] },
  },
  {
    what: "bad host glob and path",
    proxy_config: {
      rules: [
        {
          name: "x",
          match_hosts: ["a.*.test"],
          match_paths: ["no-slash"],
          headers: [{ name: "X", type: "plaintext", value: "v" }],
        },
      ],
    },
  },
  {
    what: "reserved header, bad type",
    proxy_config: {
      rules: [
        {
          name: "x",
          match_hosts: ["a.test"],
          headers: [
            { name: "Host", type: "plaintext", value: "v" },
            { name: "Y", type: "secret", value: "v" },
          ],
        },
      ],
    },
  },
  {
    what: "plaintext cloud credential",
    proxy_config: {
      rules: [
        {
          name: "c",
          type: "cloud_a",
          cloud_a: {
            access_key_id: { type: "plaintext", value: "AKIA" },
            secret_access_key: { type: "opaque", value: "s" },
          },
        },
      ],
    },
  },
  {
    what: "two cloud_a rules",
    proxy_config: {
      rules: [
        {
          name: "a",
          type: "cloud_a",
          cloud_a: { access_key_id: { type: "opaque", value: "k" }, secret_access_key: { type: "opaque", value: "s" } },
        },
        {
          name: "b",
          type: "aws",
          aws: { access_key_id: { type: "opaque", value: "k" }, secret_access_key: { type: "opaque", value: "s" } },
        },
      ],
    },
  },
  {
    what: "callback url and ttl",
    proxy_config: { callbacks: [{ match_hosts: ["a.test"], url: "ftp://x.test/", ttl_seconds: 5 }] },
  },
  {
    what: "unknown field, duplicate rule names",
    proxy_config: {
      extra: 1,
      rules: [
        { name: "d", match_hosts: ["a.test"], headers: [{ name: "X", type: "plaintext", value: "v" }] },
        { name: "d", match_hosts: ["b.test"], headers: [{ name: "X", type: "plaintext", value: "v" }] },
      ],
    },
  },
  { what: "not an object", proxy_config: ["rules"] },
  { what: "empty access pattern", proxy_config: { access_control: { allow_list: [""] }, no_proxy: ["*"] } },
  {
    what: "missing workspace secret",
    proxy_config: {
      rules: [
        {
          name: "s",
          match_hosts: ["a.test"],
          headers: [{ name: "Authorization", type: "workspace_secret", value: "Bearer {NO_SUCH_SECRET}" }],
        },
      ],
    },
  },
];

/**
 * `proxy_config` on deployments is the sandboxes' contract: every bad config answers 422 with the
 * same `detail` (loc under `["body","proxy_config",…]`, msg, type) on POST and PATCH of a
 * deployment as on POST of a sandbox, and nothing is created.
 */
describe("deployment proxy_config validation matches sandboxes", () => {
  test("the same 422 details for a table of bad configs", async (t) => {
    if (!requireCapability(t, process.platform === "linux" && isRoot(), "the sandboxes feature needs root on Linux"))
      return;
    const sandboxes = createSandboxesFeature({
      ...process.env,
      WHARF_SANDBOX_BASE_CACHE: BASE_CACHE,
      WHARF_SANDBOX_WARM_POOL: "0",
    });
    const p = (await startEgressPlatform(t, { also: [sandboxes] }))!;
    const base = { source: "internal_source", source_config: {}, source_revision_config: {}, secrets: [] };
    let res = await p.api("/v2/deployments", { method: "POST", json: { ...base, name: "target" } });
    assert.equal(res.status, 201, await res.clone().text());
    const target = await res.json();

    for (const row of BAD) {
      const sandbox = await p.api("/v2/sandboxes/boxes", {
        method: "POST",
        json: { name: "v", proxy_config: row.proxy_config },
      });
      const create = await p.api("/v2/deployments", {
        method: "POST",
        json: { ...base, name: "v", proxy_config: row.proxy_config },
      });
      const patch = await p.api(`/v2/deployments/${target.id}`, {
        method: "PATCH",
        json: { proxy_config: row.proxy_config },
      });
      const want = (await sandbox.json()) as { detail: Issue[] };
      assert.equal(sandbox.status, 422, `${row.what}: the sandbox answered ${sandbox.status} ${JSON.stringify(want)}`);
      assert.ok(
        want.detail.length > 0 && want.detail.every((i) => i.loc[0] === "body" && i.loc[1] === "proxy_config"),
        `${row.what}: ${JSON.stringify(want)}`,
      );
      for (const [how, r] of [
        ["POST", create],
        ["PATCH", patch],
      ] as const) {
        assert.equal(r.status, 422, `${row.what}: ${how} answered ${r.status}`);
        assert.deepEqual(await r.json(), want, `${row.what}: ${how}`);
      }
    }
    res = await p.api("/v2/deployments");
    assert.deepEqual(
      (await res.json()).resources.map((d: { name: string }) => d.name),
      ["target"],
      "nothing was created",
    );
    assert.equal(
      (await (await p.api(`/v2/deployments/${target.id}`)).json()).proxy_config,
      null,
      "nothing was changed",
    );
    assert.ok(
      !JSON.stringify(await (await p.api("/v2/sandboxes/boxes")).json()).includes('"name":"v"'),
      "no sandbox either",
    );
  });
});
