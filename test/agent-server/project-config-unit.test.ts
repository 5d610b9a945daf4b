import assert from "node:assert/strict";
import { test } from "node:test";
import { corsHeaders } from "../../src/agent-server/api/cors.ts";
import { graphConfigFromEnv } from "../../src/agent-server/project/graph-config.ts";
import { ignoredKeys } from "../../src/agent-server/project/project-config.ts";
import { fieldTexts } from "../../src/agent-server/storage/store-index.ts";

test("ignoredKeys names every key this server does not use", () => {
  const cases: Array<[Record<string, unknown>, RegExp[]]> = [
    [{ graphs: {}, env: {}, http: { app: "x" }, store: {}, checkpointer: {} }, []],
    [{ graphs: {}, python_version: "3.12" }, []],
    [{ graphs: {}, pip_installer: "uv", pip_config_file: "pip.conf", source: { kind: "uv" } }, []],
    [{ graphs: {}, keep_pkg_tools: true }, [/"keep_pkg_tools" is for container image builds/]],
    [{ graphs: {}, ui_config: {} }, [/"ui_config"/]],
    [{ graphs: {}, nonsense: 1 }, [/unknown key "nonsense"/]],
    [{ graphs: {}, http: { mount_prefix: "/x" } }, [/"http.mount_prefix" is not supported/]],
    [{ graphs: {}, store: { ttl: {}, extra: 1 } }, [/"store.extra"/]],
  ];
  for (const [raw, want] of cases) {
    const got = ignoredKeys(raw);
    assert.equal(got.length, want.length, JSON.stringify(got));
    want.forEach((re, i) => assert.match(got[i], re));
  }
});

test("LANGGRAPH_CONFIG: context apart from config; malformed values name the variable", () => {
  assert.deepEqual(graphConfigFromEnv(undefined), {});
  assert.deepEqual(graphConfigFromEnv('{"g":{"configurable":{"a":1},"context":{"b":2}}}'), {
    g: { config: { configurable: { a: 1 } }, context: { b: 2 } },
  });
  for (const bad of ["{", "[]", '{"g":1}', '{"g":{"context":3}}'])
    assert.throws(() => graphConfigFromEnv(bad), /LANGGRAPH_CONFIG/);
});

test("corsHeaders: the LangGraph server's defaults, and http.cors", () => {
  const req = { origin: "https://a.example", preflight: false, requestHeaders: null };
  assert.deepEqual(corsHeaders(null, req), {
    "access-control-allow-origin": "*",
    "access-control-expose-headers": "content-location,x-pagination-total",
  });
  assert.equal(corsHeaders({ allow_origins: ["https://b.example"] }, req)["access-control-allow-origin"], undefined);
  assert.equal(
    corsHeaders({ allow_origin_regex: "^https://.*\\.example$" }, req)["access-control-allow-origin"],
    "https://a.example",
  );
  const pre = corsHeaders(null, { origin: null, preflight: true, requestHeaders: "content-type" });
  assert.equal(pre["access-control-allow-methods"], "GET,HEAD,PUT,POST,DELETE,PATCH");
  assert.equal(pre["access-control-allow-headers"], "content-type");
  assert.equal(
    corsHeaders({ max_age: 60, allow_methods: ["GET"] }, { origin: null, preflight: true, requestHeaders: null })[
      "access-control-max-age"
    ],
    "60",
  );
});

test("fieldTexts: store.index field paths", () => {
  const v = { text: "hi", n: 3, tags: [{ t: "a" }, { t: "b" }], deep: { x: "y" } };
  const cases: Array<[string, string[]]> = [
    ["$", [JSON.stringify(v)]],
    ["text", ["hi"]],
    ["n", ["3"]],
    ["tags[*].t", ["a", "b"]],
    ["deep.x", ["y"]],
    ["missing", []],
  ];
  for (const [field, want] of cases) assert.deepEqual(fieldTexts(v, field), want, field);
});
