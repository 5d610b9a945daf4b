import { AgentError } from "../errors.ts";
import type { AuthContext, AuthFilters, ResourceAction } from "../auth/custom-auth.ts";
import type { AuthCache } from "./auth-cache.ts";
import type { PythonWorkers } from "./worker-pool.ts";
import { WorkerRequestError, type WorkerHello } from "./worker.ts";

type Described = NonNullable<WorkerHello["auth"]>;

/** Whether an authorization event has a Python handler (pure): the LangGraph server's dispatch keys. */
export function hasHandler(handlers: string[], event: ResourceAction): boolean {
  const [resource, action] = event.split(":");
  return [event, `${resource}:*`, `*:${action}`, "*:*"].some((k) => handlers.includes(k));
}

/**
 * The path and query of a request's URL (pure): `Request.url` is already serialised by the URL
 * parser, so they are cut out of it, not parsed again on every authenticated request.
 */
export function pathAndQuery(url: string): { path: string; query: string } {
  const start = url.indexOf("/", url.indexOf("//") + 2);
  if (start < 0) return { path: "/", query: "" };
  const hash = url.indexOf("#", start);
  const end = hash < 0 ? url.length : hash;
  const q = url.indexOf("?", start);
  if (q < 0 || q > end) return { path: url.slice(start, end), query: "" };
  return { path: url.slice(start, q), query: url.slice(q + 1, end) };
}

/**
 * The project's Python `langgraph_sdk.Auth`, run in the worker: one round trip to authenticate a
 * request, one per authorization event that has a handler (events without one are allowed here).
 */
export class PythonAuth {
  readonly where: string;

  constructor(
    private readonly worker: PythonWorkers,
    private readonly described: Described,
    readonly disableStudioAuth: boolean,
    private readonly cache: AuthCache | null = null,
  ) {
    this.where = described.where;
  }

  get hasAuthenticate(): boolean {
    return this.described.authenticate;
  }

  async authenticate(request: Request, onHandlerBug: (err: unknown) => void): Promise<AuthContext> {
    const cacheKey = this.cache?.key(request.headers) ?? null;
    const cached = cacheKey ? this.cache!.get(cacheKey) : null;
    if (cached) return cached;
    const { path, query } = pathAndQuery(request.url);
    // The body only for a handler that asks for it (reading it costs, and it is read again by the route).
    const wantsBody = this.described.params.includes("request") || this.described.params.includes("body");
    const body = wantsBody && request.body ? await request.clone().text() : null;
    try {
      const r = await this.worker.call<{ user: AuthContext["user"]; permissions: string[] }>("auth.authenticate", {
        method: request.method,
        path,
        query,
        headers: [...request.headers.entries()],
        body,
      });
      const ctx = { user: r.user, scopes: r.permissions };
      if (cacheKey) this.cache!.set(cacheKey, ctx);
      return ctx;
    } catch (err) {
      if (err instanceof WorkerRequestError && err.status) throw new AgentError(err.status, err.message, err.headers);
      onHandlerBug(err);
      throw new AgentError(401, "Unauthorized");
    }
  }

  async authorize<V>(ctx: AuthContext | null, event: ResourceAction, value: V): Promise<{ filters: AuthFilters; value: V }> {
    if (!ctx || !hasHandler(this.described.handlers, event)) return { filters: undefined, value };
    let r: { filters: AuthFilters | null; value: unknown };
    try {
      r = await this.worker.call("auth.authorize", { event, value, user: ctx.user, permissions: ctx.scopes });
    } catch (err) {
      if (err instanceof WorkerRequestError && err.status) throw new AgentError(err.status, err.message, err.headers);
      throw err;
    }
    // Handlers mutate `value` (owner metadata, a store namespace): the routes read the object they passed.
    if (value && typeof value === "object" && r.value && typeof r.value === "object") {
      for (const k of Object.keys(value)) delete (value as Record<string, unknown>)[k];
      Object.assign(value, r.value);
    }
    return { filters: r.filters ?? undefined, value };
  }
}
