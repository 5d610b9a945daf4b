import { v7 } from "uuid";

/** Time-ordered UUIDv7: rows sort by creation without a second column. */
export function newId(): string {
  return v7();
}
