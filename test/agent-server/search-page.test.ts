import assert from "node:assert/strict";
import { test } from "node:test";
import { searchPage, type SearchPageRequest } from "../../src/agent-server/storage/search-page.ts";

// The sort and page of a search: only a known column ever reaches ORDER BY.
const SORTABLE = new Set(["thread_id", "status", "created_at", "updated_at"]);
const CASES: Array<[string, SearchPageRequest, ReturnType<typeof searchPage>]> = [
  ["defaults", {}, { sortBy: "created_at", order: "desc", limit: 10, offset: 0 }],
  [
    "known column, ascending",
    { sort_by: "updated_at", sort_order: "asc", limit: 3, offset: 6 },
    { sortBy: "updated_at" as "created_at", order: "asc", limit: 3, offset: 6 },
  ],
  [
    "unknown column falls back",
    { sort_by: "name; drop table x", sort_order: "desc" },
    { sortBy: "created_at", order: "desc", limit: 10, offset: 0 },
  ],
  [
    "null sort fields",
    { sort_by: null, sort_order: null },
    { sortBy: "created_at", order: "desc", limit: 10, offset: 0 },
  ],
  ["any order but asc is desc", { sort_order: "ASC" }, { sortBy: "created_at", order: "desc", limit: 10, offset: 0 }],
  ["limit 0 is kept", { limit: 0 }, { sortBy: "created_at", order: "desc", limit: 0, offset: 0 }],
];

for (const [name, query, want] of CASES) {
  test(`searchPage: ${name}`, () => assert.deepEqual(searchPage(query, SORTABLE), want));
}
