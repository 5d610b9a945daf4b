import { readJsonBody } from "../http/route.ts";
import type { z } from "zod";
import { ValidationFailed } from "../http/errors.ts";
import { toValidationIssues, type RequestPart } from "../http/validation.ts";

/**
 * An agent-server error. Like the LangGraph server, the body is the message as plain text
 * (`404 No assistant found for "x". …`); clients print it as `HTTP 404: <message>`.
 */
export class AgentError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly headers: Record<string, string> = {},
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

export const notFound = (what: string) => new AgentError(404, `${what} not found`);

/** Parses one part of a request with a zod schema; a failure is a FastAPI-shaped 422. */
export function parseWith<T>(part: RequestPart, schema: z.ZodType<T>, value: unknown, name?: string): T {
  const result = schema.safeParse(value);
  if (!result.success) {
    const issues = toValidationIssues(part, result.error, value);
    throw new ValidationFailed(name ? issues.map((i) => ({ ...i, loc: [part, name, ...i.loc.slice(1)] })) : issues);
  }
  return result.data;
}

/** The JSON body of a request; an empty body is `emptyAs` when given, malformed JSON a 422. */
export const readJson = readJsonBody;
