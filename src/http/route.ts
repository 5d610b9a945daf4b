import type { Context, Hono } from "hono";
import { z } from "zod";
import { HttpError, ValidationFailed } from "./errors.ts";
import type { AppEnv, Principal } from "./principal.ts";
import { toValidationIssues, type RequestPart } from "./validation.ts";
import type { OpenApiRegistry } from "./openapi.ts";

export type Method = "get" | "post" | "put" | "patch" | "delete";

export interface RouteInput<P, Q, B> {
  params: P;
  query: Q;
  body: B;
  c: Context<AppEnv>;
  principal: Principal;
}

export interface RouteSpec<P = unknown, Q = unknown, B = unknown> {
  method: Method;
  /** Hono-style path relative to the router's prefix, e.g. `/secrets/:key`. */
  path: string;
  summary: string;
  tags: string[];
  /** `none` for endpoints reached without credentials (OAuth redirects, health). Default: required. */
  auth?: "required" | "none";
  params?: z.ZodType<P>;
  query?: z.ZodType<Q>;
  body?: z.ZodType<B>;
  /** Body is optional (an empty body parses as `{}`). */
  bodyOptional?: boolean;
  responses: Record<number, { description: string; schema?: z.ZodType }>;
  handler: (input: RouteInput<P, Q, B>) => Promise<Response> | Response;
}

function parsePart<T>(part: RequestPart, schema: z.ZodType<T> | undefined, value: unknown): T {
  if (!schema) return value as T;
  const result = schema.safeParse(value);
  if (!result.success) throw new ValidationFailed(toValidationIssues(part, result.error, value));
  return result.data;
}

/** Query strings as an object: repeated keys become arrays, single ones stay strings. */
function queryObject(c: Context): Record<string, string | string[]> {
  const all = c.req.queries();
  const out: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(all)) out[k] = v.length === 1 ? v[0] : v;
  return out;
}

/** The JSON body of a request: empty is `emptyAs` when given (else a 422), malformed JSON a 422. */
export async function readJsonBody(req: Pick<Request, "text">, emptyAs?: unknown): Promise<unknown> {
  const text = await req.text();
  if (text.trim() === "") {
    if (emptyAs !== undefined) return emptyAs;
    throw new ValidationFailed([{ loc: ["body"], msg: "Field required", type: "missing" }]);
  }
  try {
    return JSON.parse(text);
  } catch (err) {
    const pos = /position (\d+)/.exec((err as Error).message);
    throw new ValidationFailed([
      { loc: ["body", pos ? Number(pos[1]) : 0], msg: "JSON decode error", type: "json_invalid" },
    ]);
  }
}

/**
 * Registers typed routes on a Hono app and records them for the OpenAPI document, so that one zod
 * schema per body gives the validation, the TypeScript type and the published contract.
 */
export class Router {
  constructor(
    private readonly app: Hono<AppEnv>,
    private readonly registry: OpenApiRegistry,
    private readonly prefix: string,
    private readonly requirePrincipal: (c: Context<AppEnv>) => Promise<Principal>,
  ) {}

  add<P, Q, B>(spec: RouteSpec<P, Q, B>): void {
    this.registry.add(this.prefix, spec as RouteSpec);
    this.app.on(spec.method.toUpperCase(), spec.path, async (c) => {
      const principal = spec.auth === "none" ? (undefined as unknown as Principal) : await this.requirePrincipal(c);
      const params = parsePart("path", spec.params, c.req.param());
      const query = parsePart("query", spec.query, queryObject(c));
      const body = spec.body
        ? parsePart("body", spec.body, await readJsonBody(c.req, spec.bodyOptional ? {} : undefined))
        : (undefined as B);
      return spec.handler({ params, query, body, c, principal });
    });
  }
}

export { HttpError, z };
