import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import { z } from "zod";
import { keyringFromEnv } from "../../src/crypto/keyring.ts";
import { SecretBox } from "../../src/crypto/secret-box.ts";
import { ValidationFailed } from "../../src/http/errors.ts";
import { toValidationIssues } from "../../src/http/validation.ts";
import { prepareProxyConfig, presentProxyConfig, proxyConfigSchema } from "../../src/egress/config/proxy-config.ts";
import { upsertSecrets } from "../../src/secrets/secret-store.ts";
import { bootstrap } from "../../src/platform/bootstrap.ts";
import { openTestStore } from "../support/dialects.ts";

/** The body shape of the sandboxes API: proxy_config is one field of it. */
const body = z.object({ proxy_config: proxyConfigSchema.nullish() }).strict();

function issuesOf(config: unknown) {
  const r = body.safeParse({ proxy_config: config });
  return r.success ? [] : toValidationIssues("body", r.error, { proxy_config: config });
}

const opaque = (value = "x") => ({ type: "opaque", value });
const header = (over: Record<string, unknown> = {}) => ({
  name: "Authorization",
  type: "plaintext",
  value: "Bearer t",
  ...over,
});
const headerRule = (over: Record<string, unknown> = {}) => ({
  name: "r",
  match_hosts: ["api.example.com"],
  headers: [header()],
  ...over,
});
const cloudA = (over: Record<string, unknown> = {}) => ({
  name: "aws",
  type: "cloud_a",
  enabled: true,
  cloud_a: { access_key_id: opaque("AKIA"), secret_access_key: opaque("s") },
  ...over,
});
const cloudB = (over: Record<string, unknown> = {}) => ({
  name: "gcp",
  type: "cloud_b",
  enabled: true,
  cloud_b: { service_account_json: opaque("{}"), scopes: ["https://www.googleapis.com/auth/cloud-platform"] },
  ...over,
});
const callback = (over: Record<string, unknown> = {}) => ({
  match_hosts: ["api.example.com"],
  url: "https://cb.example.com/resolve",
  ttl_seconds: 300,
  ...over,
});

const P = ["body", "proxy_config"];

/** [name, config, expected loc (after body/proxy_config), optional msg substring] */
const BAD: Array<[string, unknown, Array<string | number>, string?]> = [
  [
    "both lists",
    { access_control: { allow_list: ["a.com"], deny_list: ["b.com"] } },
    ["access_control"],
    "exactly one",
  ],
  ["neither list", { access_control: {} }, ["access_control"], "exactly one"],
  ["unknown top-level key", { rulez: [] }, ["rulez"]],
  ["rules not a list", { rules: {} }, ["rules"]],
  [
    "plaintext cloud_a key",
    {
      rules: [
        cloudA({ cloud_a: { access_key_id: { type: "plaintext", value: "AKIA" }, secret_access_key: opaque() } }),
      ],
    },
    ["rules", 0, "cloud_a", "access_key_id", "type"],
    "plaintext",
  ],
  [
    "plaintext cloud_a secret via aws alias",
    {
      rules: [
        {
          name: "a",
          type: "aws",
          aws: { access_key_id: opaque(), secret_access_key: { type: "plaintext", value: "s" } },
        },
      ],
    },
    ["rules", 0, "aws", "secret_access_key", "type"],
    "plaintext",
  ],
  [
    "plaintext cloud_b SA",
    { rules: [cloudB({ cloud_b: { service_account_json: { type: "plaintext", value: "{}" }, scopes: ["s"] } })] },
    ["rules", 0, "cloud_b", "service_account_json", "type"],
    "plaintext",
  ],
  [
    "unknown secret type",
    { rules: [cloudA({ cloud_a: { access_key_id: { type: "env", value: "x" }, secret_access_key: opaque() } })] },
    ["rules", 0, "cloud_a", "access_key_id", "type"],
  ],
  [
    "cloud_a ws secret not a bare ref",
    {
      rules: [
        cloudA({
          cloud_a: { access_key_id: { type: "workspace_secret", value: "AKIA{X}" }, secret_access_key: opaque() },
        }),
      ],
    },
    ["rules", 0, "cloud_a", "access_key_id", "value"],
  ],
  [
    "cloud_a with match_hosts",
    { rules: [cloudA({ match_hosts: ["s3.amazonaws.com"] })] },
    ["rules", 0, "match_hosts"],
    "must not be set",
  ],
  [
    "cloud_a with match_paths",
    { rules: [cloudA({ match_paths: ["/x"] })] },
    ["rules", 0, "match_paths"],
    "must not be set",
  ],
  ["cloud_a with headers", { rules: [cloudA({ headers: [header()] })] }, ["rules", 0, "headers"], "must not be set"],
  [
    "cloud_b with match_hosts",
    { rules: [cloudB({ match_hosts: ["storage.googleapis.com"] })] },
    ["rules", 0, "match_hosts"],
  ],
  [
    "two cloud_a rules",
    { rules: [cloudA(), cloudA({ name: "aws2", enabled: false })] },
    ["rules", 1],
    "at most one cloud_a",
  ],
  [
    "two cloud_a via alias",
    { rules: [cloudA(), { name: "a2", type: "aws", aws: { access_key_id: opaque(), secret_access_key: opaque() } }] },
    ["rules", 1],
    "at most one cloud_a",
  ],
  [
    "two enabled cloud_b rules",
    { rules: [cloudB(), cloudB({ name: "gcp2" })] },
    ["rules", 1],
    "at most one enabled cloud_b",
  ],
  [
    "two enabled cloud_b, enabled omitted",
    {
      rules: [
        cloudB({ enabled: undefined }),
        { name: "g2", type: "gcp", gcp: { service_account_json: opaque(), scopes: ["s"] } },
      ],
    },
    ["rules", 1],
  ],
  [
    "empty cloud_b scopes",
    { rules: [cloudB({ cloud_b: { service_account_json: opaque(), scopes: [] } })] },
    ["rules", 0, "cloud_b", "scopes"],
    "non-empty",
  ],
  [
    "missing cloud_b scopes",
    { rules: [cloudB({ cloud_b: { service_account_json: opaque() } })] },
    ["rules", 0, "cloud_b", "scopes"],
    "required",
  ],
  [
    "scope with a space",
    { rules: [cloudB({ cloud_b: { service_account_json: opaque(), scopes: ["a b"] } })] },
    ["rules", 0, "cloud_b", "scopes", 0],
  ],
  [
    "cloud_a without credentials",
    { rules: [{ name: "a", type: "cloud_a" }] },
    ["rules", 0, "cloud_a"],
    "needs its credentials",
  ],
  [
    "cloud_a and aws both given",
    { rules: [cloudA({ aws: { access_key_id: opaque(), secret_access_key: opaque() } })] },
    ["rules", 0, "aws"],
  ],
  [
    "cloud_a carrying cloud_b",
    { rules: [cloudA({ cloud_b: { service_account_json: opaque(), scopes: ["s"] } })] },
    ["rules", 0, "cloud_b"],
  ],
  [
    "header rule carrying cloud_a",
    { rules: [headerRule({ cloud_a: { access_key_id: opaque(), secret_access_key: opaque() } })] },
    ["rules", 0, "cloud_a"],
  ],
  ["unknown rule type", { rules: [headerRule({ type: "azure" })] }, ["rules", 0, "type"]],
  [
    "header rule without hosts",
    { rules: [headerRule({ match_hosts: [] })] },
    ["rules", 0, "match_hosts"],
    "at least one host",
  ],
  [
    "header rule without headers",
    { rules: [headerRule({ headers: [] })] },
    ["rules", 0, "headers"],
    "at least one header",
  ],
  ["duplicate rule names", { rules: [headerRule(), headerRule()] }, ["rules", 1, "name"], "already used"],
  [
    "duplicate header in a rule",
    { rules: [headerRule({ headers: [header(), header({ name: "authorization" })] })] },
    ["rules", 0, "headers", 1, "name"],
  ],
  [
    "ttl too small",
    { callbacks: [callback({ ttl_seconds: 59 })] },
    ["callbacks", 0, "ttl_seconds"],
    "between 60 and 3600",
  ],
  [
    "ttl too large",
    { callbacks: [callback({ ttl_seconds: 3601 })] },
    ["callbacks", 0, "ttl_seconds"],
    "between 60 and 3600",
  ],
  ["ttl not an integer", { callbacks: [callback({ ttl_seconds: 60.5 })] }, ["callbacks", 0, "ttl_seconds"]],
  [
    "callback ws-secret header",
    { callbacks: [callback({ request_headers: [header({ type: "workspace_secret", value: "{K}" })] })] },
    ["callbacks", 0, "request_headers", 0, "type"],
    "only plaintext and opaque",
  ],
  [
    "callback ftp url",
    { callbacks: [callback({ url: "ftp://cb.example.com/x" })] },
    ["callbacks", 0, "url"],
    "http:// or https://",
  ],
  ["callback file url", { callbacks: [callback({ url: "file:///etc/passwd" })] }, ["callbacks", 0, "url"]],
  ["callback not a url", { callbacks: [callback({ url: "cb.example.com" })] }, ["callbacks", 0, "url"]],
  [
    "callback url with credentials",
    { callbacks: [callback({ url: "https://u:p@cb.example.com/" })] },
    ["callbacks", 0, "url"],
  ],
  ["callback without hosts", { callbacks: [callback({ match_hosts: [] })] }, ["callbacks", 0, "match_hosts"]],
  ["callback full_request", { callbacks: [callback({ full_request: true })] }, ["callbacks", 0, "full_request"]],
  ["callback bad host glob", { callbacks: [callback({ match_hosts: ["*"] })] }, ["callbacks", 0, "match_hosts", 0]],
  ["host glob *", { rules: [headerRule({ match_hosts: ["*"] })] }, ["rules", 0, "match_hosts", 0]],
  ["host glob *.com", { rules: [headerRule({ match_hosts: ["*.com"] })] }, ["rules", 0, "match_hosts", 0]],
  [
    "host glob with scheme",
    { rules: [headerRule({ match_hosts: ["https://api.example.com"] })] },
    ["rules", 0, "match_hosts", 0],
  ],
  [
    "host glob with port",
    { rules: [headerRule({ match_hosts: ["api.example.com:443"] })] },
    ["rules", 0, "match_hosts", 0],
  ],
  [
    "host glob with space",
    { rules: [headerRule({ match_hosts: ["api example.com"] })] },
    ["rules", 0, "match_hosts", 0],
  ],
  [
    "host glob double dot",
    { rules: [headerRule({ match_hosts: ["api..example.com"] })] },
    ["rules", 0, "match_hosts", 0],
  ],
  [
    "host glob mid *. label",
    { rules: [headerRule({ match_hosts: ["api.*.example.com"] })] },
    ["rules", 0, "match_hosts", 0],
  ],
  [
    "host glob wildcard TLD",
    { rules: [headerRule({ match_hosts: ["api.example.*"] })] },
    ["rules", 0, "match_hosts", 0],
  ],
  [
    "host glob too long",
    { rules: [headerRule({ match_hosts: ["a".repeat(64) + ".com"] })] },
    ["rules", 0, "match_hosts", 0],
  ],
  ["empty host glob", { rules: [headerRule({ match_hosts: [""] })] }, ["rules", 0, "match_hosts", 0]],
  ["path without slash", { rules: [headerRule({ match_paths: ["v1/*"] })] }, ["rules", 0, "match_paths", 0]],
  ["path inner star", { rules: [headerRule({ match_paths: ["/v1/*/x"] })] }, ["rules", 0, "match_paths", 0]],
  ["path with query", { rules: [headerRule({ match_paths: ["/v1?x=1"] })] }, ["rules", 0, "match_paths", 0]],
  [
    "path with dot segment",
    { rules: [headerRule({ match_paths: ["/v1/../admin"] })] },
    ["rules", 0, "match_paths", 1 - 1],
  ],
  ["path with CRLF", { rules: [headerRule({ match_paths: ["/v1\r\n"] })] }, ["rules", 0, "match_paths", 0]],
  [
    "header name with colon",
    { rules: [headerRule({ headers: [header({ name: "X:Y" })] })] },
    ["rules", 0, "headers", 0, "name"],
  ],
  [
    "header name Host",
    { rules: [headerRule({ headers: [header({ name: "Host" })] })] },
    ["rules", 0, "headers", 0, "name"],
    "managed by the proxy",
  ],
  [
    "header name Transfer-Encoding",
    { rules: [headerRule({ headers: [header({ name: "transfer-encoding" })] })] },
    ["rules", 0, "headers", 0, "name"],
  ],
  [
    "header value CRLF",
    { rules: [headerRule({ headers: [header({ value: "a\r\nX-Evil: 1" })] })] },
    ["rules", 0, "headers", 0, "value"],
    "CR, LF",
  ],
  [
    "header value NUL",
    { rules: [headerRule({ headers: [header({ type: "opaque", value: "a\u0000b" })] })] },
    ["rules", 0, "headers", 0, "value"],
  ],
  [
    "header type unknown",
    { rules: [headerRule({ headers: [header({ type: "secret" })] })] },
    ["rules", 0, "headers", 0, "type"],
  ],
  [
    "ws-secret without ref",
    { rules: [headerRule({ headers: [header({ type: "workspace_secret", value: "Bearer KEY" })] })] },
    ["rules", 0, "headers", 0, "value"],
    "{KEY}",
  ],
  [
    "ws-secret malformed ref",
    { rules: [headerRule({ headers: [header({ type: "workspace_secret", value: "Bearer {1KEY}" })] })] },
    ["rules", 0, "headers", 0, "value"],
  ],
  [
    "ws-secret unbalanced brace",
    { rules: [headerRule({ headers: [header({ type: "workspace_secret", value: "Bearer {KEY} }" })] })] },
    ["rules", 0, "headers", 0, "value"],
  ],
  [
    "empty plaintext value",
    { rules: [headerRule({ headers: [header({ value: "" })] })] },
    ["rules", 0, "headers", 0, "value"],
  ],
  [
    "header extra key",
    { rules: [headerRule({ headers: [{ ...header(), is_set: true }] })] },
    ["rules", 0, "headers", 0, "is_set"],
  ],
  ["env var bad name", { rules: [headerRule({ env_vars: { "1X": "y" } })] }, ["rules", 0, "env_vars", "1X"]],
  [
    "access: regex unbalanced",
    { access_control: { allow_list: ["~(a"] } },
    ["access_control", "allow_list", 0],
    "invalid regex",
  ],
  [
    "access: regex lookahead",
    { access_control: { allow_list: ["~(?=a)a"] } },
    ["access_control", "allow_list", 0],
    "invalid regex",
  ],
  ["access: regex backreference", { access_control: { deny_list: ["~(a)\\1"] } }, ["access_control", "deny_list", 0]],
  [
    "access: regex too long",
    { access_control: { allow_list: ["~" + "a".repeat(300)] } },
    ["access_control", "allow_list", 0],
    "longer than",
  ],
  ["access: empty regex", { access_control: { allow_list: ["~"] } }, ["access_control", "allow_list", 0]],
  [
    "access: CIDR with port",
    { access_control: { allow_list: ["10.0.0.0/8:5432"] } },
    ["access_control", "allow_list", 0],
  ],
  [
    "access: CIDR bits too big",
    { access_control: { allow_list: ["10.0.0.0/33"] } },
    ["access_control", "allow_list", 0],
  ],
  ["access: bad ipv4", { access_control: { allow_list: ["300.1.1.1"] } }, ["access_control", "allow_list", 0]],
  ["access: ipv4 short spelling", { access_control: { allow_list: ["127.1"] } }, ["access_control", "allow_list", 0]],
  ["access: port 0", { access_control: { allow_list: ["db.example.com:0"] } }, ["access_control", "allow_list", 0]],
  [
    "access: port leading zero",
    { access_control: { allow_list: ["db.example.com:05432"] } },
    ["access_control", "allow_list", 0],
  ],
  [
    "access: port too big",
    { access_control: { allow_list: ["db.example.com:65536"] } },
    ["access_control", "allow_list", 0],
  ],
  [
    "access: port trick",
    { access_control: { allow_list: ["evil.com:443.allowed.com"] } },
    ["access_control", "allow_list", 0],
  ],
  [
    "access: ipv6 with port unbracketed",
    { access_control: { allow_list: ["2001:db8::1::443"] } },
    ["access_control", "allow_list", 0],
  ],
  [
    "access: bracket no close",
    { access_control: { allow_list: ["[2001:db8::1:443"] } },
    ["access_control", "allow_list", 0],
  ],
  [
    "access: bracketed name",
    { access_control: { allow_list: ["[example.com]:443"] } },
    ["access_control", "allow_list", 0],
  ],
  ["access: bare star", { access_control: { deny_list: ["*"] } }, ["access_control", "deny_list", 0]],
  [
    "access: mid wildcard",
    { access_control: { allow_list: ["api-*.example.com"] } },
    ["access_control", "allow_list", 0],
  ],
  ["access: scheme", { access_control: { allow_list: ["https://example.com"] } }, ["access_control", "allow_list", 0]],
  ["access: empty", { access_control: { allow_list: [""] } }, ["access_control", "allow_list", 0]],
  ["access: spaces", { access_control: { allow_list: [" example.com"] } }, ["access_control", "allow_list", 0]],
  ["access: path", { access_control: { allow_list: ["example.com/x"] } }, ["access_control", "allow_list", 0]],
  ["access: unknown key", { access_control: { allow: ["a.com"] } }, ["access_control", "allow"]],
  ["no_proxy bad host", { no_proxy: ["not a host"] }, ["no_proxy", 0]],
  ["no_proxy not a list", { no_proxy: "localhost" }, ["no_proxy"]],
];

describe("proxy_config validation (schema, precise locs)", () => {
  for (const [name, config, loc, msg] of BAD) {
    test(`rejects: ${name}`, () => {
      const issues = issuesOf(config);
      assert.ok(issues.length > 0, `expected a 422 for ${name}`);
      const want = [...P, ...loc];
      const hit = issues.find((i) => JSON.stringify(i.loc) === JSON.stringify(want));
      assert.ok(hit, `no issue at ${JSON.stringify(want)}; got ${JSON.stringify(issues)}`);
      if (msg) assert.match(hit!.msg, new RegExp(msg.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")), hit!.msg);
    });
  }

  const GOOD: Array<[string, unknown]> = [
    ["empty", {}],
    ["null fields (pydantic clients)", { rules: null, callbacks: null, access_control: null, no_proxy: null }],
    ["header rule", { rules: [headerRule({ match_paths: ["/v1/*", "/exact"], enabled: false })] }],
    [
      "six access forms, allow",
      {
        access_control: {
          allow_list: [
            "api.example.com",
            "db.example.com:5432",
            "*.example.org",
            "~^api[0-9]+\\.example\\.net$",
            "10.0.0.0/8",
            "192.0.2.7",
            "[2001:db8::1]:443",
            "2001:db8::/32",
            "203.0.113.5:22",
          ],
        },
      },
    ],
    ["deny list", { access_control: { deny_list: ["evil.example.com", "169.254.0.0/16"] } }],
    ["empty allow list (no egress)", { access_control: { allow_list: [] } }],
    [
      "cloud_a + disabled cloud_b + enabled cloud_b",
      { rules: [cloudA(), cloudB({ enabled: false }), cloudB({ name: "g2" })] },
    ],
    [
      "aliases",
      {
        rules: [
          {
            name: "a",
            type: "aws",
            enabled: true,
            aws: { access_key_id: opaque(), secret_access_key: opaque() },
            match_hosts: [],
            headers: null,
          },
          { name: "g", type: "gcp", gcp: { service_account_json: opaque(), scopes: ["s"] } },
        ],
      },
    ],
    [
      "callback",
      {
        callbacks: [
          callback({ ttl_seconds: 60, request_headers: [header(), header({ name: "X-Key", type: "opaque" })] }),
          callback({ ttl_seconds: 3600, url: "http://127.0.0.1:9/x" }),
        ],
      },
    ],
    [
      "globs",
      {
        rules: [
          headerRule({ match_hosts: ["*.github.com", "api-*.example.com", "Bücher.example", "127.0.0.1", "[::1]"] }),
        ],
        no_proxy: ["localhost", "127.0.0.1", "*.internal.example.com"],
      },
    ],
  ];
  for (const [name, config] of GOOD) {
    test(`accepts: ${name}`, () => assert.deepEqual(issuesOf(config), []));
  }
});

describe("prepareProxyConfig (secrets, sealing) and presentProxyConfig", () => {
  test("missing {KEY} secrets are 422 at each reference; opaque values sealed, never presented", async (t) => {
    const s = await openTestStore(t, "sqlite");
    if (!s) return;
    t.after(() => s.cleanup());
    const boot = await bootstrap(s.store.db, s.home);
    const ws = boot.workspaceId;
    const box = new SecretBox(keyringFromEnv(crypto.randomBytes(32).toString("base64")));
    const deps = { db: s.store.db, box };
    await upsertSecrets(s.store.db, box, ws, [
      { key: "GH", value: "ghp_realtoken" },
      { key: "BAD", value: "x\r\ny" },
      { key: "AKID", value: "AKIAREAL" },
    ]);

    const input = {
      rules: [
        headerRule({
          name: "gh",
          headers: [
            header({ type: "workspace_secret", value: "token {GH}" }),
            header({ name: "X-Other", type: "workspace_secret", value: "{MISSING_ONE}" }),
          ],
        }),
        {
          name: "aws",
          type: "aws",
          aws: {
            access_key_id: { type: "workspace_secret", value: "{MISSING_TWO}" },
            secret_access_key: opaque("sekrit"),
          },
        },
      ],
    };
    await assert.rejects(prepareProxyConfig(deps, ws, proxyConfigSchema.parse(input)), (err: unknown) => {
      assert.ok(err instanceof ValidationFailed);
      assert.deepEqual(
        err.issues.map((i) => i.loc),
        [
          [...P, "rules", 0, "headers", 1, "value"],
          [...P, "rules", 1, "aws", "access_key_id", "value"],
        ],
      );
      assert.match(err.issues[0].msg, /MISSING_ONE does not exist/);
      return true;
    });

    await assert.rejects(
      prepareProxyConfig(
        deps,
        ws,
        proxyConfigSchema.parse({
          rules: [headerRule({ headers: [header({ type: "workspace_secret", value: "{BAD}" })] })],
        }),
      ),
      (err: unknown) => {
        assert.ok(err instanceof ValidationFailed);
        assert.deepEqual(err.issues[0].loc, [...P, "rules", 0, "headers", 0, "value"]);
        assert.doesNotMatch(JSON.stringify(err.issues), /x\\r\\ny/);
        return true;
      },
    );

    await assert.rejects(
      prepareProxyConfig(
        deps,
        ws,
        proxyConfigSchema.parse({
          rules: [cloudB({ cloud_b: { service_account_json: opaque("not json"), scopes: ["s"] } })],
        }),
      ),
      (err: unknown) => {
        assert.ok(err instanceof ValidationFailed);
        assert.deepEqual(err.issues[0].loc, [...P, "rules", 0, "cloud_b", "service_account_json", "value"]);
        return true;
      },
    );

    const good = {
      rules: [
        headerRule({
          name: "gh",
          headers: [
            header({ type: "workspace_secret", value: "token {GH}" }),
            header({ name: "X-Opaque", type: "opaque", value: "op-secret-value" }),
            header({ name: "X-Plain", value: "plain-v" }),
          ],
        }),
        {
          name: "aws",
          type: "aws",
          aws: {
            access_key_id: { type: "workspace_secret", value: "{AKID}" },
            secret_access_key: opaque("aws-secret-value"),
          },
        },
      ],
      callbacks: [callback({ request_headers: [header({ name: "X-Cb", type: "opaque", value: "cb-secret-value" })] })],
      access_control: { deny_list: ["evil.example.com"] },
    };
    const stored = await prepareProxyConfig(deps, ws, proxyConfigSchema.parse(good));
    const text = JSON.stringify(stored);
    for (const secret of ["op-secret-value", "aws-secret-value", "cb-secret-value", "ghp_realtoken", "AKIAREAL"])
      assert.ok(!text.includes(secret), `${secret} stored in plain text`);
    const rows = await s.store.db.selectFrom("egress_sealed_values").selectAll().execute();
    assert.equal(rows.length, 3);
    for (const r of rows) assert.ok(!r.ciphertext.includes("secret-value"));

    const shown = presentProxyConfig(stored)!;
    const shownText = JSON.stringify(shown);
    for (const secret of ["op-secret-value", "aws-secret-value", "cb-secret-value", "ghp_realtoken", "AKIAREAL"])
      assert.ok(!shownText.includes(secret));
    assert.deepEqual(shown, {
      rules: [
        {
          name: "gh",
          type: null,
          enabled: true,
          match_hosts: ["api.example.com"],
          match_paths: [],
          headers: [
            { name: "Authorization", type: "workspace_secret", value: "token {GH}" },
            { name: "X-Opaque", type: "opaque", is_set: true },
            { name: "X-Plain", type: "plaintext", value: "plain-v" },
          ],
        },
        {
          name: "aws",
          type: "cloud_a",
          enabled: true,
          cloud_a: {
            access_key_id: { type: "workspace_secret", value: "{AKID}" },
            secret_access_key: { type: "opaque", is_set: true },
          },
        },
      ],
      callbacks: [
        {
          match_hosts: ["api.example.com"],
          url: "https://cb.example.com/resolve",
          ttl_seconds: 300,
          request_headers: [{ name: "X-Cb", type: "opaque", is_set: true }],
        },
      ],
      access_control: { deny_list: ["evil.example.com"] },
      no_proxy: [],
    });
  });
});
