/** The sort and page fields every search request of the LangGraph server API carries. */
export interface SearchPageRequest {
  limit?: number;
  offset?: number;
  sort_by?: string | null;
  sort_order?: string | null;
}

export interface SearchPage {
  /** A column of the caller's `sortable` set, typed as the one column every searchable table has. */
  sortBy: "created_at";
  order: "asc" | "desc";
  limit: number;
  offset: number;
}

/**
 * How a search sorts and pages, as the LangGraph server reads it: a `sort_by` outside `sortable`
 * falls back to created_at (never a column name from the request into SQL), newest first unless
 * "asc", 10 rows from offset 0 unless given.
 */
export function searchPage(query: SearchPageRequest, sortable: ReadonlySet<string>): SearchPage {
  return {
    sortBy: (query.sort_by && sortable.has(query.sort_by) ? query.sort_by : "created_at") as "created_at",
    order: query.sort_order === "asc" ? "asc" : "desc",
    limit: query.limit ?? 10,
    offset: query.offset ?? 0,
  };
}
