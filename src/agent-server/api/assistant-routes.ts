import type { Hono } from "hono";
import {
  countAssistants,
  createAssistant,
  deleteAssistant,
  getAssistant,
  listVersions,
  patchAssistant,
  resolveAssistantId,
  searchAssistants,
  setLatestVersion,
  type Assistant,
} from "../storage/assistants.ts";
import type { LoadedGraph } from "../project/graphs.ts";
import { isPythonGraph } from "../python/index.ts";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { AgentError } from "../errors.ts";
import { authorize, body, json, type C } from "./route-helpers.ts";
import {
  assistantCount,
  assistantCreate,
  assistantLatest,
  assistantPatch,
  assistantSearch,
  assistantVersions,
} from "./schemas.ts";
import { findThreadRow, searchThreads } from "../storage/threads.ts";
import type { RunEngine } from "../runs/run-engine.ts";
import { removeThread } from "./thread-removal.ts";
import { graphSchemas, resolveSchema } from "../project/graph-schemas.ts";

/** `/assistants/*`: the default assistant per graph plus user-made ones, with versions. */
export function registerAssistantRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext, engine: RunEngine): void {
  registerAssistantCrud(app, ctx, engine);
  registerAssistantGraphs(app, ctx);
}

function registerAssistantCrud(app: Hono<AgentEnv>, ctx: AgentServerContext, engine: RunEngine): void {
  app.post("/assistants", async (c) => {
    const b = await body(c, assistantCreate);
    const value = { ...b, metadata: { ...(b.metadata ?? {}) } };
    const filters = await authorize(ctx, c, "assistants:create", value);
    return json(await createAssistant(ctx, value, filters));
  });

  app.post("/assistants/search", async (c) => {
    const b = await body(c, assistantSearch, {});
    const filters = await authorize(ctx, c, "assistants:search", b);
    const { items, total } = await searchAssistants(ctx, b, filters);
    const headers: Record<string, string> = { "x-pagination-total": String(total) };
    if (b.offset + items.length < total) headers["x-pagination-next"] = String(b.offset + items.length);
    return json(items, 200, headers);
  });

  app.post("/assistants/count", async (c) => {
    const b = await body(c, assistantCount, {});
    const filters = await authorize(ctx, c, "assistants:search", { ...b, limit: undefined, offset: undefined });
    return json(await countAssistants(ctx, b, filters));
  });

  app.get("/assistants/:assistant_id", async (c) => {
    const id = resolveAssistantId(ctx, c.req.param("assistant_id"));
    const filters = await authorize(ctx, c, "assistants:read", { assistant_id: id });
    return json(await getAssistant(ctx, id, filters));
  });

  app.patch("/assistants/:assistant_id", async (c) => {
    const id = resolveAssistantId(ctx, c.req.param("assistant_id"));
    const b = await body(c, assistantPatch, {});
    const value = { assistant_id: id, ...b };
    const filters = await authorize(ctx, c, "assistants:update", value);
    return json(await patchAssistant(ctx, id, value, filters));
  });

  app.delete("/assistants/:assistant_id", async (c) => {
    const id = resolveAssistantId(ctx, c.req.param("assistant_id"));
    const filters = await authorize(ctx, c, "assistants:delete", { assistant_id: id });
    await deleteAssistant(ctx, id, filters);
    // `delete_threads=true` also deletes the threads made for it (`metadata.assistant_id`), those
    // the caller may delete; the answer is the deleted ids with a 200, as the LangGraph server's.
    if (c.req.query("delete_threads") === "true") {
      const metadata = { assistant_id: id };
      const { items } = await searchThreads(
        ctx,
        { metadata, limit: Number.MAX_SAFE_INTEGER },
        await authorize(ctx, c, "threads:search", { metadata }),
      );
      for (const t of items) {
        const threadFilters = await authorize(ctx, c, "threads:delete", { thread_id: t.thread_id });
        if (await findThreadRow(ctx.db, ctx, t.thread_id, threadFilters)) await removeThread(ctx, engine, t.thread_id);
      }
    }
    return json([id]);
  });

  app.post("/assistants/:assistant_id/versions", async (c) => {
    const id = resolveAssistantId(ctx, c.req.param("assistant_id"));
    const b = await body(c, assistantVersions, {});
    const filters = await authorize(ctx, c, "assistants:read", { assistant_id: id });
    return json(await listVersions(ctx, id, b, filters));
  });

  app.post("/assistants/:assistant_id/latest", async (c) => {
    const id = resolveAssistantId(ctx, c.req.param("assistant_id"));
    const b = await body(c, assistantLatest);
    const filters = await authorize(ctx, c, "assistants:update", { assistant_id: id, version: b.version });
    return json(await setLatestVersion(ctx, id, b.version, filters));
  });
}

function registerAssistantGraphs(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  const graphOf = async (c: C) => {
    const id = resolveAssistantId(ctx, c.req.param("assistant_id")!);
    const filters = await authorize(ctx, c, "assistants:read", { assistant_id: id });
    const assistant = await getAssistant(ctx, id, filters);
    const loaded = ctx.graphs.get(assistant.graph_id);
    if (!loaded) throw new AgentError(404, `Graph "${assistant.graph_id}" not found`);
    return { assistant, loaded };
  };
  const jsGraph = (loaded: LoadedGraph, assistant: Assistant) =>
    loaded.get({ configurable: assistant.config.configurable ?? {} }, null);

  app.get("/assistants/:assistant_id/graph", async (c) => {
    const { assistant, loaded } = await graphOf(c);
    const q = c.req.query("xray");
    const xray = q === "true" ? true : q && /^\d+$/.test(q) ? Number(q) : undefined;
    if (isPythonGraph(loaded)) return json(await loaded.draw(assistant.config, xray));
    const drawable = await (await jsGraph(loaded, assistant)).getGraphAsync({ ...assistant.config, xray });
    return json(drawable.toJSON());
  });

  app.get("/assistants/:assistant_id/schemas", async (c) => {
    const { assistant, loaded } = await graphOf(c);
    if (isPythonGraph(loaded))
      return json({ graph_id: assistant.graph_id, ...(await loaded.schemas(assistant.config)) });
    return json({
      graph_id: assistant.graph_id,
      ...(await graphSchemas(await jsGraph(loaded, assistant), ctx.schemas.sources(assistant.graph_id))),
    });
  });

  app.get("/assistants/:assistant_id/subgraphs/:namespace?", async (c) => {
    const { assistant, loaded } = await graphOf(c);
    if (isPythonGraph(loaded))
      return json(
        await loaded.subgraphs(assistant.config, c.req.param("namespace"), c.req.query("recurse") === "true"),
      );
    const graph = await jsGraph(loaded, assistant);
    const out: Record<string, unknown> = {};
    if (graph.getSubgraphsAsync) {
      for await (const [ns, sub] of graph.getSubgraphsAsync(
        c.req.param("namespace"),
        c.req.query("recurse") === "true",
      ))
        out[ns] = await resolveSchema(sub, ctx.schemas.sources(assistant.graph_id), ns);
    }
    return json(out);
  });
}
