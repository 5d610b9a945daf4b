import type { Hono } from "hono";
import type { Item } from "@langchain/langgraph";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { AgentError } from "../errors.ts";
import { authorize, body, json, noContent, query } from "./route-helpers.ts";
import { storeDelete, storeGet, storeNamespaces, storePut, storeSearch } from "./schemas.ts";
import { checkNamespace, InvalidNamespace } from "../storage/store.ts";

/** An item as the LangGraph server writes it: snake_case timestamps, `score` only from a scored search. */
function toApiItem(item: (Item & { score?: number }) | null) {
  if (!item) return null;
  const out: Record<string, unknown> = { namespace: item.namespace, key: item.key, value: item.value, created_at: item.createdAt.toISOString(), updated_at: item.updatedAt.toISOString() };
  if ("score" in item && item.score !== undefined) out.score = item.score;
  return out;
}

/** Namespace rule violations (before and after the auth handler rewrote it) are a 422 with the reason. */
function namespaceOf(value: unknown, opts: Parameters<typeof checkNamespace>[1] = {}): string[] {
  try {
    return checkNamespace(value, opts);
  } catch (err) {
    if (err instanceof InvalidNamespace) throw new AgentError(422, err.message);
    throw err;
  }
}

/**
 * `/store/*`: the LangGraph key-value store. The project's `store` auth handlers see each call's
 * value and may rewrite its namespace (e.g. prefix the user's identity) or deny it (`false`); a
 * filter they return is not applied, as documented for LangGraph auth.
 */
export function registerStoreRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  app.put("/store/items", async (c) => {
    const b = await body(c, storePut);
    const value = { namespace: namespaceOf(b.namespace), key: b.key, value: b.value, index: b.index ?? null, ttl: b.ttl ?? null };
    await authorize(ctx, c, "store:put", value);
    // An absent `ttl` takes the project's `store.ttl.default_ttl`; an explicit null never expires.
    const ttl = b.ttl === undefined ? undefined : value.ttl;
    await ctx.store.putItem(namespaceOf(value.namespace, { reservedRoot: true }), value.key, value.value, value.index, ttl);
    return noContent();
  });

  app.get("/store/items", async (c) => {
    const q = query(c, storeGet);
    const value = { namespace: namespaceOf(q.namespace === "" ? [] : q.namespace.split(".")), key: q.key, refresh_ttl: q.refresh_ttl === undefined ? null : q.refresh_ttl === "true" };
    await authorize(ctx, c, "store:get", value);
    return json(toApiItem(await ctx.store.getItem(namespaceOf(value.namespace), value.key, value.refresh_ttl)));
  });

  app.delete("/store/items", async (c) => {
    const b = await body(c, storeDelete);
    const value = { namespace: namespaceOf(b.namespace ?? []), key: b.key };
    await authorize(ctx, c, "store:delete", value);
    await ctx.store.delete(namespaceOf(value.namespace), value.key);
    return noContent();
  });

  app.post("/store/items/search", async (c) => {
    const b = await body(c, storeSearch, {});
    const value = {
      namespace: namespaceOf(b.namespace_prefix ?? [], { allowEmpty: true }),
      filter: b.filter ?? null,
      limit: b.limit ?? 10,
      offset: b.offset ?? 0,
      query: b.query ?? null,
      refresh_ttl: b.refresh_ttl ?? null,
    };
    // As documented for LangGraph auth, store handlers confine a caller by rewriting the namespace;
    // a filter they return (e.g. a `*` handler's `{owner}` meant for threads) is not applied to items.
    await authorize(ctx, c, "store:search", value);
    const filter = value.filter ?? undefined;
    const items = await ctx.store.search(namespaceOf(value.namespace, { allowEmpty: true }), { filter, limit: value.limit, offset: value.offset, query: value.query ?? undefined });
    return json({ items: items.map(toApiItem) });
  });

  app.post("/store/namespaces", async (c) => {
    const b = await body(c, storeNamespaces, {});
    const opts = { allowWildcard: true };
    const value = {
      namespace: b.prefix?.length ? namespaceOf(b.prefix, opts) : null,
      suffix: b.suffix?.length ? namespaceOf(b.suffix, opts) : null,
      max_depth: b.max_depth ?? null,
      limit: b.limit ?? 100,
      offset: b.offset ?? 0,
    };
    await authorize(ctx, c, "store:list_namespaces", value);
    const namespaces = await ctx.store.listNamespaces({
      prefix: value.namespace ? namespaceOf(value.namespace, opts) : undefined,
      suffix: value.suffix ? namespaceOf(value.suffix, opts) : undefined,
      maxDepth: value.max_depth ?? undefined,
      limit: value.limit,
      offset: value.offset,
    });
    return json({ namespaces });
  });
}
