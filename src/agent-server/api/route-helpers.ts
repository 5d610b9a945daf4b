import type { Context } from "hono";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import type { AuthFilters, ResourceAction } from "../auth/custom-auth.ts";
import { parseWith, readJson } from "../errors.ts";
import { sharedJsonBody } from "./json-body.ts";
import { uuidParam } from "./schemas.ts";
import { CORS_HEADERS, toJson } from "../wire.ts";
import type { z } from "zod";

export type C = Context<AgentEnv>;

/** A JSON answer the way the LangGraph server writes it (messages as dicts, CORS headers). */
export function json(value: unknown, status = 200, headers: Record<string, string> = {}): Response {
  return new Response(toJson(value, false), {
    status,
    headers: { "content-type": "application/json", ...CORS_HEADERS, ...headers },
  });
}

export function noContent(status = 204): Response {
  return new Response(null, { status, headers: CORS_HEADERS });
}

/** Runs the project's authorization handler for an event; returns the filter to apply to reads. */
export async function authorize<V>(
  ctx: AgentServerContext,
  c: C,
  event: ResourceAction,
  value: V,
): Promise<AuthFilters> {
  if (!ctx.customAuth) return undefined;
  return (await ctx.customAuth.authorize(c.get("auth"), event, value)).filters;
}

/**
 * The validated JSON body: the object a project's `http.app` middleware parsed (and maybe edited),
 * else read through Hono's request, whose text a middleware's read left cached.
 */
export async function body<T>(c: C, schema: z.ZodType<T>, emptyAs: unknown = undefined): Promise<T> {
  const shared = await sharedJsonBody(c.req)?.then(
    (value) => ({ value }),
    // The middleware's parse failed (malformed JSON): read it again below for the 422.
    () => undefined,
  );
  return parseWith("body", schema, shared ? shared.value : await readJson(c.req, emptyAs));
}

export function query<T>(c: C, schema: z.ZodType<T>): T {
  return parseWith("query", schema, c.req.query());
}

/** A UUID path parameter (a malformed id is a 422 at `["path", name]`). */
export function uuidAt(c: C, name: string): string {
  return parseWith("path", uuidParam, c.req.param(name), name);
}
