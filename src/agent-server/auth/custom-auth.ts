import { pathToFileURL } from "node:url";
import { AgentError } from "../errors.ts";
import type { AgentProject } from "../project/project.ts";

/** The user an authenticate handler returned, normalised as the LangGraph server does. */
export interface AuthUser {
  identity: string;
  permissions: string[];
  display_name: string;
  is_authenticated: boolean;
  [key: string]: unknown;
}

export interface AuthContext {
  user: AuthUser;
  scopes: string[];
}

/** A filter an authorization handler returned: `{key: v}`, `{key: {$eq: v}}`, `{key: {$contains: v | v[]}}`. */
export type AuthFilters = Record<string, unknown> | undefined;

export type ResourceAction =
  | `threads:${"create" | "read" | "update" | "delete" | "search" | "create_run"}`
  | `assistants:${"create" | "read" | "update" | "delete" | "search"}`
  | `crons:${"create" | "read" | "update" | "delete" | "search"}`
  | `store:${"put" | "get" | "search" | "list_namespaces" | "delete"}`;

export const STUDIO_USER: AuthUser = {
  kind: "StudioUser",
  identity: "langgraph-studio-user",
  display_name: "langgraph-studio-user",
  permissions: [],
  is_authenticated: true,
};

interface HandlerCache {
  authenticate?: (request: Request) => unknown;
  callbacks?: Record<string, (arg: Record<string, unknown>) => unknown>;
}

const REASONS: Record<number, string> = {
  400: "Bad Request",
  401: "Unauthorized",
  403: "Forbidden",
  404: "Not Found",
  409: "Conflict",
  422: "Unprocessable Entity",
  429: "Too Many Requests",
};

/** A handler's `HTTPException` (from `@langchain/langgraph-sdk/auth`, matched by shape, not class). */
function toAgentError(err: unknown): AgentError | null {
  if (err instanceof AgentError) return err;
  if (err && typeof err === "object" && typeof (err as { status?: unknown }).status === "number" && "headers" in err) {
    const e = err as { status: number; message?: string; headers?: Record<string, string> | Headers };
    const headers = e.headers instanceof Headers ? Object.fromEntries(e.headers.entries()) : (e.headers ?? {});
    return new AgentError(e.status, e.message || REASONS[e.status] || "Error", headers);
  }
  return null;
}

/** Normalises what `authenticate` returned; anything else is a handler bug. */
export function normaliseUser(response: unknown): AuthContext {
  if (typeof response === "string")
    return {
      scopes: [],
      user: { identity: response, permissions: [], display_name: response, is_authenticated: true },
    };
  if (response && typeof response === "object" && typeof (response as { identity?: unknown }).identity === "string") {
    const r = response as Record<string, unknown> & { identity: string };
    const scopes = Array.isArray(r.permissions) ? (r.permissions as string[]) : [];
    return {
      scopes,
      user: {
        ...r,
        permissions: scopes,
        is_authenticated: (r.is_authenticated as boolean | undefined) ?? true,
        display_name: (r.display_name as string | undefined) ?? r.identity,
      },
    };
  }
  throw new Error(
    "Invalid auth response received. Make sure to either return a `string` or an object with `identity` property.",
  );
}

/** What the server needs of a project's auth, whichever runtime runs its handlers (JavaScript here, Python in the worker). */
export interface ProjectAuth {
  readonly where: string;
  readonly disableStudioAuth: boolean;
  readonly hasAuthenticate: boolean;
  authenticate(request: Request, onHandlerBug: (err: unknown) => void): Promise<AuthContext>;
  authorize<V>(ctx: AuthContext | null, event: ResourceAction, value: V): Promise<{ filters: AuthFilters; value: V }>;
}

/** The project's `Auth` object: authentication of every request and per-resource authorization. */
export class CustomAuth implements ProjectAuth {
  constructor(
    private readonly cache: HandlerCache,
    readonly disableStudioAuth: boolean,
    readonly where: string,
  ) {}

  static async load(project: AgentProject): Promise<CustomAuth | null> {
    if (!project.auth) return null;
    const where = `${project.auth.file}:${project.auth.exportName}`;
    let value: unknown;
    try {
      value = ((await import(pathToFileURL(project.auth.file).href)) as Record<string, unknown>)[
        project.auth.exportName
      ];
    } catch (err) {
      throw new Error(`cannot load auth ${where}: ${(err as Error).message}`, { cause: err });
    }
    if (!value || typeof value !== "object" || !("~handlerCache" in value)) {
      throw new Error(`auth ${where} must be an instance of Auth from @langchain/langgraph-sdk/auth`);
    }
    return new CustomAuth(
      (value as { "~handlerCache": HandlerCache })["~handlerCache"],
      project.auth.disableStudioAuth,
      where,
    );
  }

  get hasAuthenticate(): boolean {
    return typeof this.cache.authenticate === "function";
  }

  /** Runs the handler; its HTTPException keeps status, message and headers, anything else is 401. */
  async authenticate(request: Request, onHandlerBug: (err: unknown) => void): Promise<AuthContext> {
    let response: unknown;
    try {
      response = await this.cache.authenticate!(request);
    } catch (err) {
      const known = toAgentError(err);
      if (known) throw known;
      onHandlerBug(err);
      throw new AgentError(401, "Unauthorized");
    }
    try {
      return normaliseUser(response);
    } catch (err) {
      onHandlerBug(err);
      throw new AgentError(401, "Unauthorized");
    }
  }

  /**
   * The most specific handler for the event (`resource:action` → `resource` → `*:action` → `*`)
   * may mutate `value`, allow, deny (`false` → 403) or return a filter on resource metadata.
   */
  async authorize<V>(
    ctx: AuthContext | null,
    event: ResourceAction,
    value: V,
  ): Promise<{ filters: AuthFilters; value: V }> {
    const callbacks = this.cache.callbacks;
    if (!callbacks || !ctx) return { filters: undefined, value };
    const [resource, action] = event.split(":");
    const key = [event, resource, `*:${action}`, "*"].find((k) => typeof callbacks[k] === "function");
    if (!key) return { filters: undefined, value };
    let result: unknown;
    try {
      result = await callbacks[key]({ event, resource, action, value, permissions: ctx.scopes, user: ctx.user });
    } catch (err) {
      const known = toAgentError(err);
      if (known) throw known;
      throw err;
    }
    if (result === undefined || result === null || result === true) return { filters: undefined, value };
    if (result === false) throw new AgentError(403, "Forbidden");
    if (typeof result !== "object")
      throw new Error(
        `auth handler for ${event} returned ${typeof result}; expected a filter object, null, undefined or a boolean`,
      );
    return { filters: Object.keys(result).length ? (result as AuthFilters) : undefined, value };
  }
}

/** Whether resource metadata passes an authorization filter (the in-memory form of the SQL filter). */
export function matchesFilters(metadata: Record<string, unknown> | null | undefined, filters: AuthFilters): boolean {
  if (!filters) return true;
  for (const [key, cond] of Object.entries(filters)) {
    const actual = metadata?.[key];
    if (cond !== null && typeof cond === "object" && !Array.isArray(cond) && ("$eq" in cond || "$contains" in cond)) {
      const c = cond as { $eq?: unknown; $contains?: unknown };
      if ("$eq" in c && !jsonEqual(actual, c.$eq)) return false;
      if ("$contains" in c) {
        if (!Array.isArray(actual)) return false;
        const wanted = Array.isArray(c.$contains) ? c.$contains : [c.$contains];
        if (!wanted.every((w) => actual.some((a) => jsonEqual(a, w)))) return false;
      }
    } else if (!jsonEqual(actual, cond)) return false;
  }
  return true;
}

function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  return JSON.stringify(a) === JSON.stringify(b);
}
