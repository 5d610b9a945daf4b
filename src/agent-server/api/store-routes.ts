import type { Hono } from "hono";
import type { Item } from "@langchain/langgraph";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { AgentError } from "../errors.ts";
import { authorize, body, json, noContent, query } from "./route-helpers.ts";
import { storeDelete, storeGet, storeNamespaces, storePut, storeSearch } from "./schemas.ts";
import { checkNamespace, InvalidNamespace } from "../storage/store.ts";
import { storeItemFilter } from "../auth/store-filters.ts";

/** How many items or namespaces a filtered listing reads before applying the handler's filter. */
const FILTERED_SCAN = 10_000;

/** An item as the LangGraph server writes it: snake_case timestamps, `score` only from a scored search. */
function toApiItem(item: (Item & { score?: number }) | null) {
  if (!item) return null;
  const out: Record<string, unknown> = {
    namespace: item.namespace,
    key: item.key,
    value: item.value,
    created_at: item.createdAt.toISOString(),
    updated_at: item.updatedAt.toISOString(),
  };
  if ("score" in item && item.score !== undefined) out.score = item.score;
  return out;
}

/** Namespace rule violations (before and after the auth handler rewrote it) are a 422 with the reason. */
function namespaceOf(value: unknown, opts: Parameters<typeof checkNamespace>[1] = {}): string[] {
  try {
    return checkNamespace(value, opts);
  } catch (err) {
    if (err instanceof InvalidNamespace) throw new AgentError(422, err.message, {}, { cause: err });
    throw err;
  }
}

/**
 * `/store/*`: the LangGraph key-value store. The project's `store` auth handlers see each call's
 * value and may rewrite its namespace (e.g. prefix the user's identity) or deny it (`false`); a
 * filter they return on `namespace` or `key` confines searches and namespace listings to matching
 * items, as the LangGraph JS server applies it (other filter keys name nothing an item has).
 */
export function registerStoreRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  registerStoreItems(app, ctx);
  registerStoreListings(app, ctx);
}

function registerStoreItems(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  app.put("/store/items", async (c) => {
    const b = await body(c, storePut);
    const value = {
      namespace: namespaceOf(b.namespace),
      key: b.key,
      value: b.value,
      index: b.index ?? null,
      ttl: b.ttl ?? null,
    };
    await authorize(ctx, c, "store:put", value);
    // An absent `ttl` takes the project's `store.ttl.default_ttl`; an explicit null never expires.
    const ttl = b.ttl === undefined ? undefined : value.ttl;
    await ctx.store.putItem(
      namespaceOf(value.namespace, { reservedRoot: true }),
      value.key,
      value.value,
      value.index,
      ttl,
    );
    return noContent();
  });

  app.get("/store/items", async (c) => {
    const q = query(c, storeGet);
    const value = {
      namespace: namespaceOf(q.namespace === "" ? [] : q.namespace.split(".")),
      key: q.key,
      refresh_ttl: q.refresh_ttl === undefined ? null : q.refresh_ttl === "true",
    };
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
}

function registerStoreListings(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
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
    const allowed = storeItemFilter(await authorize(ctx, c, "store:search", value));
    const filter = value.filter ?? undefined;
    const page = allowed ? { limit: FILTERED_SCAN, offset: 0 } : { limit: value.limit, offset: value.offset };
    let items = await ctx.store.search(namespaceOf(value.namespace, { allowEmpty: true }), {
      filter,
      ...page,
      query: value.query ?? undefined,
    });
    if (allowed) items = items.filter(allowed).slice(value.offset, value.offset + value.limit);
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
    const allowed = storeItemFilter(await authorize(ctx, c, "store:list_namespaces", value));
    let namespaces = await ctx.store.listNamespaces({
      prefix: value.namespace ? namespaceOf(value.namespace, opts) : undefined,
      suffix: value.suffix ? namespaceOf(value.suffix, opts) : undefined,
      maxDepth: value.max_depth ?? undefined,
      ...(allowed ? { limit: FILTERED_SCAN, offset: 0 } : { limit: value.limit, offset: value.offset }),
    });
    if (allowed)
      namespaces = namespaces
        .filter((namespace) => allowed({ namespace }))
        .slice(value.offset, value.offset + value.limit);
    return json({ namespaces });
  });
}
