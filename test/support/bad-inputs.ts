/**
 * Generates request bodies that are wrong by construction from a JSON Schema: every body carries at
 * least one value of the wrong type (or is not JSON at all), so no generated body can succeed and
 * cause side effects, while each still exercises parsing and validation differently.
 */
type Schema = {
  type?: string | string[];
  properties?: Record<string, Schema>;
  items?: Schema;
  anyOf?: Schema[];
  required?: string[];
  enum?: unknown[];
  const?: unknown;
};

export const MALFORMED_JSON = [
  "{",
  "}",
  "[",
  '{"a":',
  "{'a':1}",
  "nul",
  "tru",
  '{"a":1,}',
  "[1,2",
  "\u0000",
  '{"a":"\\u12"}',
  '"unterminated',
  '{"a" 1}',
  "NaN",
  "Infinity",
  "--1",
  '{"a":01}',
  '\uFEFF{"a":1',
  '{"a":1}}',
  "<xml/>",
];

const samples: Record<string, unknown[]> = {
  string: ["", "x", "💥", "a".repeat(10_000), "\u0000", "../../etc/passwd", "{KEY}", "'; drop table secrets; --"],
  number: [0, -1, 1.5, 1e308, -1e308, 2 ** 53 + 1],
  integer: [0, -1, 2 ** 31, -(2 ** 53), 7],
  boolean: [true, false],
  null: [null],
  array: [[], [1], ["a", null], [[[]]], [{}]],
  object: [{}, { a: 1 }, { __proto__: { polluted: true } }, { constructor: { prototype: { x: 1 } } }],
};

function typesOf(schema: Schema | undefined): string[] {
  if (!schema) return [];
  if (schema.anyOf) return schema.anyOf.flatMap(typesOf);
  if (schema.const !== undefined) return [typeof schema.const === "string" ? "string" : typeof schema.const];
  if (schema.enum) return [...new Set(schema.enum.map((v) => (v === null ? "null" : typeof v)))];
  if (Array.isArray(schema.type)) return schema.type;
  return schema.type ? [schema.type] : [];
}

/** Values whose JSON type is not allowed by the schema; empty when the schema accepts anything. */
function wrongValues(schema: Schema | undefined): unknown[] {
  const allowed = typesOf(schema);
  if (allowed.length === 0) return [];
  const ok = new Set(
    allowed.flatMap((t) => (t === "number" ? ["number", "integer"] : t === "integer" ? ["integer"] : [t])),
  );
  const out: unknown[] = [];
  for (const [t, vals] of Object.entries(samples)) {
    if (ok.has(t)) continue;
    if (t === "integer" && ok.has("number")) continue;
    out.push(...vals);
  }
  if (ok.has("integer") && !ok.has("number")) out.push(1.5, 0.1);
  return out;
}

/** Valid JSON nested deeper than any recursive parser or validator should follow. */
const deepNest = (depth: number) => '{"a":'.repeat(depth) + "1" + "}".repeat(depth);

/** At least `count` bad bodies (as raw strings) for a JSON Schema. */
export function badBodies(schema: Schema, count: number): string[] {
  const out: string[] = [...MALFORMED_JSON];
  for (const v of wrongValues(schema)) out.push(JSON.stringify(v));
  const candidates: Array<(filler: number) => unknown> = [];
  const objectShape = (s: Schema): Array<(n: number) => unknown> => {
    const fns: Array<(n: number) => unknown> = [];
    for (const [name, prop] of Object.entries(s.properties ?? {})) {
      const wrong = wrongValues(prop);
      wrong.forEach((w) => fns.push((n) => ({ [name]: w, [`extra_${n}`]: samples.string[n % samples.string.length] })));
      if (prop.type === "object" && prop.properties) {
        for (const inner of objectShape(prop)) fns.push((n) => ({ [name]: inner(n) }));
      }
      if (prop.type === "array" && prop.items) {
        for (const w of wrongValues(prop.items)) fns.push(() => ({ [name]: [w] }));
        if (prop.items.type === "object")
          for (const inner of objectShape(prop.items)) fns.push((n) => ({ [name]: [inner(n)] }));
      }
    }
    return fns;
  };
  if (schema.type === "object") candidates.push(...objectShape(schema));
  if (schema.type === "array" && schema.items) {
    for (const w of wrongValues(schema.items)) candidates.push(() => [w]);
    if (schema.items.type === "object")
      for (const inner of objectShape(schema.items)) candidates.push((n) => [inner(n)]);
  }
  if (candidates.length) {
    for (let i = 0; out.length < count; i++) out.push(JSON.stringify(candidates[i % candidates.length](i)));
  } else {
    // The schema accepts almost anything: only type-level and syntax-level garbage is surely bad.
    for (let i = 0; out.length < count; i++) out.push(MALFORMED_JSON[i % MALFORMED_JSON.length] + " ".repeat(i));
  }
  out.push(deepNest(100_000), "[".repeat(100_000) + "]".repeat(100_000));
  return out;
}

export const BAD_PATH_VALUES = [
  "%00",
  "..",
  "%2e%2e",
  "a".repeat(3000),
  "%ZZ",
  encodeURIComponent("💥"),
  "%20",
  "'%3B--",
  "-1",
  "0",
  "null",
  encodeURIComponent("{KEY}"),
];
