import type { z } from "zod";
import type { ValidationIssue } from "./errors.ts";

export type RequestPart = "body" | "query" | "path" | "header";

function typeName(expected: string): string {
  switch (expected) {
    case "string":
      return "string";
    case "number":
      return "float";
    case "int":
      return "int";
    case "boolean":
      return "bool";
    case "object":
    case "record":
      return "dict";
    case "array":
      return "list";
    default:
      return expected;
  }
}

/** The value at a zod issue path in the raw input (undefined when a key is absent). */
function valueAt(input: unknown, path: PropertyKey[]): unknown {
  let v: unknown = input;
  for (const key of path) {
    if (v === null || typeof v !== "object" || !Object.prototype.hasOwnProperty.call(v, key)) return undefined;
    v = (v as Record<PropertyKey, unknown>)[key];
  }
  return v;
}

const article = (name: string) => (/^[aeiou]/.test(name) ? "an" : "a");

/**
 * Turns zod issues into FastAPI/Pydantic-shaped items so that clients written against the real
 * platform (which check `type == "value_error"` and read `loc`) understand our 422s.
 */
export function toValidationIssues(part: RequestPart, error: z.ZodError, input: unknown): ValidationIssue[] {
  const out: ValidationIssue[] = [];
  for (const issue of error.issues) {
    const loc: Array<string | number> = [part, ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))];
    switch (issue.code) {
      case "invalid_type": {
        const missing = valueAt(input, issue.path) === undefined;
        if (missing) out.push({ loc, msg: "Field required", type: "missing" });
        else {
          const name = typeName(issue.expected);
          out.push({
            loc,
            msg: `Input should be ${article(name)} valid ${name === "dict" ? "dictionary" : name}`,
            type: `${name}_type`,
          });
        }
        break;
      }
      case "unrecognized_keys":
        for (const key of issue.keys)
          out.push({ loc: [...loc, key], msg: "Extra inputs are not permitted", type: "extra_forbidden" });
        break;
      case "too_small": {
        const kind =
          issue.origin === "string"
            ? "string_too_short"
            : issue.origin === "array"
              ? "too_short"
              : issue.inclusive
                ? "greater_than_equal"
                : "greater_than";
        out.push({ loc, msg: issue.message, type: kind });
        break;
      }
      case "too_big": {
        const kind =
          issue.origin === "string"
            ? "string_too_long"
            : issue.origin === "array"
              ? "too_long"
              : issue.inclusive
                ? "less_than_equal"
                : "less_than";
        out.push({ loc, msg: issue.message, type: kind });
        break;
      }
      case "invalid_value":
        out.push({ loc, msg: issue.message, type: "enum" });
        break;
      case "invalid_format":
        out.push({
          loc,
          msg: issue.message,
          type: issue.format === "regex" ? "string_pattern_mismatch" : `${issue.format}_parsing`,
        });
        break;
      case "invalid_union":
        out.push({ loc, msg: issue.message, type: "union_tag_invalid" });
        break;
      default:
        out.push({
          loc,
          msg: issue.message.startsWith("Value error") ? issue.message : `Value error, ${issue.message}`,
          type: "value_error",
        });
    }
  }
  return out;
}
