import type { AuthFilters } from "./custom-auth.ts";

/** What of a store item an auth filter may name: items have no metadata, only these. */
const ITEM_FIELDS = new Set(["namespace", "key"]);

const equal = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b);

function matches(actual: unknown, cond: unknown): boolean {
  if (cond && typeof cond === "object" && !Array.isArray(cond)) {
    const c = cond as Record<string, unknown>;
    if ("$eq" in c) return equal(actual, c.$eq);
    if ("$contains" in c)
      return Array.isArray(actual)
        ? actual.some((x) => equal(x, c.$contains))
        : typeof actual === "string" && typeof c.$contains === "string" && actual.includes(c.$contains);
    return false;
  }
  // A bare label matches a namespace holding it; anything else compares whole.
  return Array.isArray(actual) && typeof cond === "string" ? actual.includes(cond) : equal(actual, cond);
}

/**
 * The part of a `store` handler's filter that names item fields (`namespace`, `key`), as the
 * LangGraph JS server applies it to items and namespaces; other keys (a `*` handler's `{owner}`
 * meant for threads' metadata) name nothing an item has and are ignored. Null when none applies.
 */
export function storeItemFilter(
  filters: AuthFilters,
): ((item: { namespace: string[]; key?: string }) => boolean) | null {
  const conds = Object.entries(filters ?? {}).filter(([k]) => ITEM_FIELDS.has(k));
  if (!conds.length) return null;
  return (item) =>
    conds.every(([k, cond]) =>
      k === "key" && item.key === undefined ? true : matches(item[k as "namespace" | "key"], cond),
    );
}
