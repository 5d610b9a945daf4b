import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { DIALECTS } from "../support/dialects.ts";
import { collect, memoryLogger, startTestAgentServer } from "./support.ts";

// A project using the langgraph.json keys beyond graphs: http.app (behind the project's custom
// auth), http.cors, store.index (semantic search with the project's embed function), store.ttl,
// checkpointer.ttl, and keys this server ignores (each named in a warning).
const PROJECT = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/httpapp");
const AUTH = { Authorization: "Bearer token-alice" };

for (const dialect of DIALECTS) {
  describe(`langgraph.json honoured (${dialect})`, () => {
    test("http.app, cors, store.index and ttl, LANGGRAPH_CONFIG, warnings for ignored keys", async (t) => {
      const mem = memoryLogger();
      const before = process.env.LANGGRAPH_CONFIG;
      process.env.LANGGRAPH_CONFIG = JSON.stringify({
        echo: { configurable: { greeting: "hello" }, context: { tone: "dry" } },
      });
      t.after(() =>
        before === undefined ? delete process.env.LANGGRAPH_CONFIG : (process.env.LANGGRAPH_CONFIG = before),
      );
      const server = await startTestAgentServer(t, { dialect, project: PROJECT, log: mem.log });
      if (!server) return;
      const client = new Client({
        apiUrl: server.url,
        apiKey: null,
        defaultHeaders: AUTH,
        callerOptions: { maxRetries: 0 },
      });

      const warnings = mem
        .lines()
        .filter((l) => l.level === 40)
        .map((l) => String(l.msg));
      for (const key of ['"frobnicate"', '"python_version"', '"http.disable_mcp"'])
        assert.ok(
          warnings.some((w) => w.includes(key)),
          `no warning names ${key}: ${warnings.join(" | ")}`,
        );

      // LANGGRAPH_CONFIG: the default assistant's config and context; runs use them.
      const [assistant] = await client.assistants.search({ graphId: "echo" });
      assert.deepEqual(assistant.config, { configurable: { greeting: "hello" } });
      assert.deepEqual(assistant.context, { tone: "dry" });
      const out = (await client.runs.wait(null, "echo", {
        input: { messages: [{ role: "human", content: "x" }] },
      })) as { messages: Array<{ content: string }> };
      assert.equal(out.messages.at(-1)!.content, "hello: x");
      const streamed = await collect(
        client.runs.stream(null, "echo", {
          input: { messages: [{ role: "human", content: "y" }] },
          streamMode: "values",
        }),
      );
      assert.equal(
        (streamed.at(-1)!.data as { messages: Array<{ content: string }> }).messages.at(-1)!.content,
        "hello: y",
      );

      // http.app: the project's routes, behind its custom auth; the API still answers around them.
      assert.equal((await fetch(`${server.url}/custom/hello`)).status, 401);
      const hello = await fetch(`${server.url}/custom/hello`, { headers: { ...AUTH, origin: "https://app.example" } });
      assert.deepEqual(await hello.json(), { hello: "world" });
      assert.equal(hello.headers.get("access-control-allow-origin"), "https://app.example");
      assert.equal(hello.headers.get("access-control-allow-credentials"), "true");
      const posted = await fetch(`${server.url}/custom/echo`, {
        method: "POST",
        headers: { ...AUTH, "content-type": "application/json" },
        body: '{"a":1}',
      });
      assert.deepEqual(await posted.json(), { got: { a: 1 } });
      // http.cors: an origin not listed gets no allow-origin; preflights answer without auth.
      const other = await fetch(`${server.url}/ok`, { headers: { ...AUTH, origin: "https://evil.example" } });
      assert.equal(other.headers.get("access-control-allow-origin"), null);
      const pre = await fetch(`${server.url}/runs/wait`, {
        method: "OPTIONS",
        headers: {
          origin: "https://app.example",
          "access-control-request-method": "POST",
          "access-control-request-headers": "content-type,authorization",
        },
      });
      assert.equal(pre.status, 204);
      assert.equal(pre.headers.get("access-control-allow-origin"), "https://app.example");
      assert.equal(pre.headers.get("access-control-allow-headers"), "content-type,authorization");

      // ui: the graph's components bundled (React external); POST answers the loader HTML behind
      // auth, the files are public, as on the LangGraph server.
      const loader = await fetch(`${server.url}/ui/echo`, {
        method: "POST",
        headers: { ...AUTH, "content-type": "application/json" },
        body: JSON.stringify({ name: "Weather", shadowRootId: "root-1" }),
      });
      const html = await loader.text();
      assert.equal(loader.status, 200, html);
      assert.match(html, /<link rel="stylesheet" href="http:\/\/[^"]+\/ui\/echo\/entrypoint\.css" \/>/);
      assert.match(
        html,
        /<script src="http:\/\/[^"]+\/ui\/echo\/entrypoint\.js" onload='__LGUI_echo\.render\("Weather", "root-1"\)'><\/script>/,
      );
      assert.equal(
        (
          await fetch(`${server.url}/ui/echo`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: "{}",
          })
        ).status,
        401,
      );
      const js = await fetch(`${server.url}/ui/echo/entrypoint.js`);
      assert.equal(js.status, 200);
      const code = await js.text();
      assert.match(code, /__LGUI_echo/);
      assert.match(code, /Weather in/);
      assert.match(code, /LGUI_REQUIRE/);
      assert.doesNotMatch(code, /function createElement\(/); // React is not bundled
      assert.match(await (await fetch(`${server.url}/ui/echo/entrypoint.css`)).text(), /font-weight: bold/);
      assert.equal((await fetch(`${server.url}/ui/echo/nope.js`)).status, 404);

      // store.index: a query ranks items by similarity of their `text` field's embedding.
      await client.store.putItem(["docs"], "a", { text: "aaaa apples" });
      await client.store.putItem(["docs"], "z", { text: "zzz buzz" });
      await client.store.putItem(["docs"], "n", { text: "zebra zoo", other: "aaaaaaaa" }, { index: false });
      const ranked = await client.store.searchItems(["docs"], { query: "zz" });
      assert.deepEqual(
        ranked.items.map((i) => i.key),
        ["z", "a", "n"],
      );
      assert.ok((ranked.items[0] as { score?: number }).score! > 0.9);
      assert.equal((ranked.items[2] as { score?: number }).score, undefined);
      const plain = await client.store.searchItems(["docs"], { limit: 2 });
      assert.equal(plain.items.length, 2);

      // store.ttl: items expire (default TTL from the project); an explicit null never does.
      await client.store.putItem(["tmp"], "k", { text: "t" }, { ttl: 0.0005 });
      await client.store.putItem(["tmp"], "keep", { text: "t" }, { ttl: null });
      await new Promise((r) => setTimeout(r, 80));
      assert.equal(await client.store.getItem(["tmp"], "k"), null);
      assert.ok(await client.store.getItem(["tmp"], "keep"));
      assert.ok(await client.store.getItem(["docs"], "a"));
      assert.equal(await server.server.ctx.store.sweepExpired(), 1);
      const row = await server.server.ctx.db
        .selectFrom("agent_store_items")
        .select(["expires_at", "ttl_minutes"])
        .where("key", "=", "a")
        .executeTakeFirstOrThrow();
      assert.equal(row.ttl_minutes, 60);
      assert.ok(Date.parse(row.expires_at!) > Date.now() + 59 * 60_000);

      // checkpointer.ttl: idle threads past the TTL (1440 min) go with their checkpoints.
      const thread = await client.threads.create({ graphId: "echo" });
      await client.runs.wait(thread.thread_id, "echo", { input: { messages: [{ role: "human", content: "keep?" }] } });
      const onThread = await collect(
        client.runs.stream(thread.thread_id, "echo", {
          input: { messages: [{ role: "human", content: "z" }] },
          streamMode: "values",
        }),
      );
      assert.equal(
        (onThread.at(-1)!.data as { messages: Array<{ content: string }> }).messages.at(-1)!.content,
        "hello: z",
      );
      assert.equal(await server.server.sweeper.sweepThreads(Date.now()), 0);
      assert.equal(await server.server.sweeper.sweepThreads(Date.now() + 1441 * 60_000), 1);
      await assert.rejects(client.threads.get(thread.thread_id), /HTTP 404/);
      assert.equal(
        await server.server.ctx.checkpointer.saver.getTuple({
          configurable: { thread_id: thread.thread_id, checkpoint_ns: "" },
        }),
        undefined,
      );
    });
  });
}
