import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, it } from "node:test";
import { fileURLToPath } from "node:url";
import { channelsSchema, pickStatic, toAnswer } from "../../src/agent-server/project/graph-schemas.ts";
import { candidateFiles, localImports, schemaCacheKey } from "../../src/agent-server/project/schema-sources.ts";
import { esmEntry } from "../../src/agent-server/project/runtime-schemas.ts";
import { GraphSchemaCache } from "../../src/agent-server/project/static-schemas.ts";
import { loadProject } from "../../src/agent-server/project/project.ts";
import { createLogger } from "../../src/log/logger.ts";
import { startTestAgentServer } from "./support.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
const PROJECT = path.join(here, "fixtures/typed-schemas");

describe("graph schemas: pure parts", () => {
  it("finds the relative imports of a source, not packages", () => {
    const cases: Array<[string, string[]]> = [
      [`import { a } from "./a.ts";`, ["./a.ts"]],
      [`import type { B } from '../b';\nexport * from "./c.js";`, ["../b", "./c.js"]],
      [`const m = await import("./lazy.mjs"); const r = require( "./r" );`, ["./lazy.mjs", "./r"]],
      [`import { z } from "zod"; import x from "@scope/pkg/sub";`, []],
      [`import "./side-effect.ts"; import "./side-effect.ts";`, ["./side-effect.ts"]],
    ];
    for (const [src, want] of cases) assert.deepEqual(localImports(src), want, src);
  });

  it("tries the files TypeScript would for a specifier", () => {
    const from = "/p/src/graph.ts";
    const cases: Array<[string, string[]]> = [
      ["./state.js", ["/p/src/state.ts", "/p/src/state.js"]],
      ["./state.mjs", ["/p/src/state.mts", "/p/src/state.mjs"]],
      ["../ui.jsx", ["/p/ui.tsx", "/p/ui.jsx"]],
      ["./state.ts", ["/p/src/state.ts"]],
      [
        "./dir",
        [
          "/p/src/dir.ts",
          "/p/src/dir.tsx",
          "/p/src/dir.mts",
          "/p/src/dir.js",
          "/p/src/dir.mjs",
          "/p/src/dir/index.ts",
          "/p/src/dir/index.js",
        ],
      ],
    ];
    for (const [spec, want] of cases) assert.deepEqual(candidateFiles(from, spec), want, spec);
  });

  it("picks the root graph's or a subgraph's entry of a static result", () => {
    const all = { graph: { state: { title: "root" } }, "graph|inner": { state: { title: "inner" } } };
    const cases: Array<[typeof all | null, string | undefined, unknown]> = [
      [all, undefined, { state: { title: "root" } }],
      [all, "inner", { state: { title: "inner" } }],
      [all, "missing", { state: { title: "root" } }],
      [null, undefined, undefined],
      [{ "x|y": {} } as never, undefined, undefined],
    ];
    for (const [input, ns, want] of cases) assert.deepEqual(pickStatic(input, ns), want);
  });

  it("finds a package's ESM entry for a subpath", () => {
    const cases: Array<[unknown, string | null]> = [
      [
        { "./zod/schema": { import: { types: "./a.d.ts", default: "./a.js" }, require: { default: "./a.cjs" } } },
        "./a.js",
      ],
      [{ "./zod/schema": { types: "./a.d.ts", import: "./b.js", require: "./b.cjs" } }, "./b.js"],
      [{ "./zod/schema": "./c.js" }, "./c.js"],
      [{ "./zod/schema": { default: "./d.js" } }, "./d.js"],
      [{ ".": "./index.js" }, null],
      [undefined, null],
    ];
    for (const [exp, want] of cases) assert.equal(esmEntry(exp, "./zod/schema"), want, JSON.stringify(exp));
  });

  it("answers every field, config and context from the one JS config schema", () => {
    const fallback = () => ({ type: "object", properties: { a: {} } });
    assert.deepEqual(toAnswer({ state: { s: 1 }, config: { c: 1 } }, fallback), {
      input_schema: { s: 1 },
      output_schema: { s: 1 },
      state_schema: { s: 1 },
      config_schema: { c: 1 },
      context_schema: { c: 1 },
    });
    assert.deepEqual(toAnswer({ state: { s: 1 }, input: { i: 1 }, output: { o: 1 } }, fallback), {
      input_schema: { i: 1 },
      output_schema: { o: 1 },
      state_schema: { s: 1 },
      config_schema: null,
      context_schema: null,
    });
    assert.deepEqual(toAnswer(undefined, fallback).state_schema, fallback());
    assert.deepEqual(channelsSchema({ channels: { a: 1, __start__: 1, "branch:x": 1, b: 1 } }), {
      type: "object",
      properties: { a: {}, b: {} },
    });
  });

  it("keys the cache on the graph file and the local files it imports", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-schema-key-"));
    try {
      fs.writeFileSync(path.join(dir, "graph.ts"), `import { S } from "./state.js";\nexport const graph = S;`);
      fs.writeFileSync(path.join(dir, "state.ts"), `export const S = 1;`);
      const key = () =>
        schemaCacheKey({ projectDir: dir, file: path.join(dir, "graph.ts"), exportName: "graph", parserVersion: "1" });
      const first = key();
      assert.equal(key(), first, "stable for the same sources");
      fs.writeFileSync(path.join(dir, "state.ts"), `export const S = 2;`);
      const second = key();
      assert.notEqual(second, first, "an imported file's edit changes the key");
      fs.writeFileSync(path.join(dir, "tsconfig.json"), `{}`);
      assert.notEqual(key(), second, "the tsconfig is part of the key");
      assert.notEqual(
        schemaCacheKey({ projectDir: dir, file: path.join(dir, "graph.ts"), exportName: "other", parserVersion: "1" }),
        key(),
        "so is the export",
      );
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe("graph schemas from TypeScript types (the LangGraph server's parser)", () => {
  // Slow: the type checker reads @langchain/langgraph's types (tens of seconds on a loaded machine).
  it(
    "answers /schemas and /subgraphs for Annotation-typed graphs, zod graphs from their runtime schema, and caches per source hash",
    { timeout: 300_000 },
    async (t) => {
      const server = await startTestAgentServer(t, { project: PROJECT, open: true });
      if (!server) return;
      const client = server.client();

      // zod with registry metadata: from the runtime definition, without the checker.
      const registry = await client.assistants.getSchemas("registry");
      const regProps = (registry.state_schema as { properties: Record<string, Record<string, unknown>> }).properties;
      assert.equal(regProps.lines.langgraph_type, "messages");
      assert.ok(regProps.count);
      assert.equal(server.server.ctx.schemas.peek("registry"), null, "no static extraction for a zod graph");

      const typed = await client.assistants.getSchemas("typed");
      const state = typed.state_schema as { properties: Record<string, Record<string, unknown>>; $schema: string };
      assert.deepEqual(state.properties.topic, { type: "string", enum: ["tides", "winds"] });
      assert.deepEqual(state.properties.notes, { type: "array", items: { type: "string" } });
      assert.equal(state.$schema, "http://json-schema.org/draft-07/schema#");
      const config = typed.config_schema as { properties: Record<string, unknown> };
      assert.deepEqual(config.properties, { model_name: { type: "string" }, temperature: { type: "number" } });
      assert.deepEqual(typed.context_schema, typed.config_schema, "JS has one schema for configurable and context");

      const subgraphs = (await client.assistants.getSubgraphs("nested", { recurse: true })) as unknown as Record<
        string,
        { state: { properties: Record<string, unknown> } }
      >;
      assert.deepEqual(Object.keys(subgraphs), ["inner"]);
      assert.deepEqual(subgraphs.inner.state.properties.child, { type: "string", enum: ["child_one", "child_two"] });

      // Cached on disk by source hash: a fresh cache (a restart) answers at once, without the checker.
      const cacheDir = server.server.ctx.schemas.dir;
      assert.ok(
        fs.readdirSync(cacheDir).some((f) => f.endsWith(".json")),
        "cache files written",
      );
      const project = loadProject(PROJECT);
      const again = new GraphSchemaCache(project.dir, project.graphs, cacheDir, createLogger({ level: "silent" }));
      const started = performance.now();
      const cached = await again.get("typed");
      assert.ok(performance.now() - started < 1000, "read from disk, not derived again");
      assert.deepEqual((cached?.graph?.config as { properties: unknown }).properties, config.properties);
    },
  );
});
