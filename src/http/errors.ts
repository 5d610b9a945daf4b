/** One item of a FastAPI-shaped validation error body. */
export interface ValidationIssue {
  loc: Array<string | number>;
  msg: string;
  type: string;
}

/**
 * An error that becomes `{"detail": ...}` with its status; `detail` may be a string or an object.
 * A `cause` is for the logs only: the response carries `detail` alone.
 */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly detail: unknown,
    readonly headers: Record<string, string> = {},
    options?: ErrorOptions,
  ) {
    super(typeof detail === "string" ? detail : JSON.stringify(detail), options);
  }
}

/** A 422 whose body is `{"detail":[{loc,msg,type}, ...]}`. */
export class ValidationFailed extends HttpError {
  constructor(readonly issues: ValidationIssue[]) {
    super(422, issues);
  }
}

export const notFound = (what: string) => new HttpError(404, `${what} not found`);
export const conflict = (message: string) => new HttpError(409, message);
export const badRequest = (message: string) => new HttpError(400, message);
export const unauthorized = (message: string) =>
  new HttpError(401, message, { "WWW-Authenticate": 'Bearer realm="wharf", ApiKey header="X-Api-Key"' });
export const forbidden = (message: string) => new HttpError(403, message);

/** A validation failure at one place, for checks zod cannot express (for example a missing secret). */
export function invalidAt(loc: Array<string | number>, msg: string, type = "value_error"): ValidationFailed {
  return new ValidationFailed([{ loc, msg, type }]);
}
