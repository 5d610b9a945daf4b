import { HttpError } from "../../http/errors.ts";

/** A data-plane error with LangSmith Deployment's `{"detail":{"error","message"}}` body. */
export function dataplaneError(status: number, error: string, message: string): HttpError {
  return new HttpError(status, { error, message });
}
