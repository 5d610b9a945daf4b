import fs from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { toJsonSchema } from "@langchain/core/utils/json_schema";
import { isZodSchemaV3, isZodSchemaV4 } from "@langchain/core/utils/types";
import type { RunnableGraph } from "./graphs.ts";
import type { StaticGraphSchema } from "./static-schemas.ts";

/** The functions of `@langchain/langgraph/zod/schema` this reader uses. */
interface ZodSchemaModule {
  getUpdateTypeSchema(graph: unknown): unknown;
  getInputTypeSchema(graph: unknown): unknown;
  getOutputTypeSchema(graph: unknown): unknown;
  getConfigTypeSchema(graph: unknown): unknown;
}

interface Builder {
  _schemaRuntimeDefinition?: unknown;
  _inputRuntimeDefinition?: unknown;
  _outputRuntimeDefinition?: unknown;
  _configRuntimeSchema?: unknown;
}

interface StateSchemaLike {
  getJsonSchema(): unknown;
  getInputJsonSchema(): unknown;
}

/** LangGraph's marker for "input is the state, every key optional". */
const PARTIAL_STATE = Symbol.for("langgraph.state.partial");

const isStateSchema = (v: unknown): v is StateSchemaLike =>
  typeof v === "object" &&
  v !== null &&
  typeof (v as StateSchemaLike).getJsonSchema === "function" &&
  typeof (v as StateSchemaLike).getInputJsonSchema === "function";

/** `exports[subpath]`'s ESM file of a package manifest (pure: table-tested). */
export function esmEntry(exportsField: unknown, subpath: string): string | null {
  let e = (exportsField as Record<string, unknown> | undefined)?.[subpath];
  for (let i = 0; i < 4 && e && typeof e === "object"; i++) {
    const cond = e as Record<string, unknown>;
    e = cond.import ?? cond.default ?? cond.node;
  }
  return typeof e === "string" ? e : null;
}

const modules = new Map<string, Promise<ZodSchemaModule | null>>();

/**
 * `@langchain/langgraph/zod/schema` as the graph's own module sees it: `withLangGraph` metadata
 * (reducers, `jsonSchemaExtra`) lives in a registry of the copy of `@langchain/langgraph` the
 * project imports, which is usually not this server's copy.
 */
function zodSchemaModule(graphFile: string | null): Promise<ZodSchemaModule | null> {
  const from = graphFile ?? fileURLToPath(import.meta.url);
  let root: string;
  try {
    root = path.dirname(createRequire(from).resolve("@langchain/langgraph/package.json"));
  } catch {
    root = "";
  }
  let p = modules.get(root);
  if (!p) {
    p = (async () => {
      if (root) {
        const entry = esmEntry(
          JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8")).exports,
          "./zod/schema",
        );
        if (entry) return (await import(pathToFileURL(path.join(root, entry)).href)) as ZodSchemaModule;
      }
      return (await import("@langchain/langgraph/zod/schema")) as unknown as ZodSchemaModule;
    })().catch(() => null); // an old LangGraph without zod support: the other readers answer
    modules.set(root, p);
  }
  return p;
}

function attempt<T>(fn: () => T): T | undefined {
  try {
    return fn() ?? undefined;
  } catch {
    return undefined; // an unconvertible definition: that field stays unknown
  }
}

/** StateSchema definitions carry their own JSON schemas (with each value's `jsonSchemaExtra`). */
function fromStateSchema(b: Builder): StaticGraphSchema | undefined {
  const state = b._schemaRuntimeDefinition;
  const input = b._inputRuntimeDefinition;
  const output = b._outputRuntimeDefinition;
  if (!isStateSchema(state) && !isStateSchema(input) && !isStateSchema(output)) return undefined;
  const s: StaticGraphSchema = {
    state: isStateSchema(state) ? attempt(() => state.getJsonSchema()) : undefined,
    input: isStateSchema(input)
      ? attempt(() => input.getInputJsonSchema())
      : input === PARTIAL_STATE && isStateSchema(state)
        ? attempt(() => state.getInputJsonSchema())
        : undefined,
    output: isStateSchema(output) ? attempt(() => output.getJsonSchema()) : undefined,
  };
  return s.state || s.input || s.output ? s : undefined;
}

/** zod definitions as LangGraph's registry reads them (the state as an update: every key optional). */
function fromZodRegistry(graph: RunnableGraph, m: ZodSchemaModule | null): StaticGraphSchema | undefined {
  if (!m) return undefined;
  const s: StaticGraphSchema = {
    state: attempt(() => m.getUpdateTypeSchema(graph)),
    input: attempt(() => m.getInputTypeSchema(graph)),
    output: attempt(() => m.getOutputTypeSchema(graph)),
    config: attempt(() => m.getConfigTypeSchema(graph)),
  };
  return s.state || s.input || s.output || s.config ? s : undefined;
}

/** zod definitions converted directly (no registry metadata). */
function fromPlainZod(b: Builder): StaticGraphSchema | undefined {
  const convert = (def: unknown) =>
    isZodSchemaV4(def) || isZodSchemaV3(def) ? attempt(() => toJsonSchema(def as never)) : undefined;
  const state = convert(b._schemaRuntimeDefinition) as Record<string, unknown> | undefined;
  const s: StaticGraphSchema = {
    state,
    input: convert(b._inputRuntimeDefinition) ?? (state ? { ...state, required: undefined } : undefined),
    output: convert(b._outputRuntimeDefinition),
    config: convert(b._configRuntimeSchema),
  };
  return s.state || s.input || s.output || s.config ? s : undefined;
}

/**
 * A graph's schemas from its runtime definitions, in the LangGraph server's order: StateSchema,
 * zod through LangGraph's registry, plain zod. Undefined for Annotation state (its types are
 * TypeScript only: see GraphSchemaCache).
 */
export async function runtimeSchema(
  graph: RunnableGraph,
  graphFile: string | null,
): Promise<StaticGraphSchema | undefined> {
  const b = graph.builder as Builder | undefined;
  if (!b || typeof b !== "object") return undefined;
  return fromStateSchema(b) ?? fromZodRegistry(graph, await zodSchemaModule(graphFile)) ?? fromPlainZod(b);
}
