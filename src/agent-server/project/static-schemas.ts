import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import type { Logger } from "../../log/logger.ts";
import type { ProjectGraph } from "./project.ts";
import { schemaCacheKey } from "./schema-sources.ts";

/** A graph's schemas as the LangGraph server's parser derives them (JSON Schema draft 7). */
export interface StaticGraphSchema {
  state?: unknown;
  input?: unknown;
  output?: unknown;
  config?: unknown;
}

/** Schemas of a graph and its subgraphs: `name` for the graph, `name|namespace` for a subgraph. */
export type StaticSchemas = Record<string, StaticGraphSchema>;

const CHILD = new URL("./schema-extract-child.mjs", import.meta.url);
/** A project whose types take longer than this is answered without them (the channel list). */
const EXTRACT_TIMEOUT_MS = 5 * 60_000;

function parserVersion(): string {
  try {
    return String(createRequire(import.meta.url)("@langchain/langgraph-api/package.json").version);
  } catch {
    return "unknown"; // the package hides its manifest: the key then changes only with the sources
  }
}

/**
 * Schemas derived from graphs' TypeScript types (Annotation state, a typed `configurable` or
 * context), for graphs whose runtime definitions carry no schema. Deriving them runs the
 * TypeScript checker over the project (seconds to a minute), so it happens in a child process
 * (its memory is returned when it ends), once per content: results are kept on disk under a hash of the graph's sources
 * (see schemaCacheKey), and requests share one extraction in flight.
 */
export class GraphSchemaCache {
  private readonly memory = new Map<string, StaticSchemas | null>();
  private readonly inFlight = new Map<string, Promise<StaticSchemas | null>>();
  private readonly keys = new Map<string, string>();
  private readonly version = parserVersion();
  private readonly children = new Set<ChildProcess>();

  constructor(
    private readonly projectDir: string,
    private readonly graphs: ProjectGraph[],
    readonly dir: string,
    private readonly log: Logger,
  ) {}

  /** The graph's static schemas, derived now if neither cached nor in flight (null: none could be read). */
  get(graphId: string): Promise<StaticSchemas | null> {
    if (this.memory.has(graphId)) return Promise.resolve(this.memory.get(graphId)!);
    return this.inFlight.get(graphId) ?? this.extract([graphId]).get(graphId)!;
  }

  /** The module file of a JavaScript graph of the project (null for another). */
  fileOf(graphId: string): string | null {
    return this.graphs.find((x) => x.graphId === graphId && x.runtime === "js")?.file ?? null;
  }

  /** The graph's schema sources: its file, and its derived schemas awaited (`wait`) or only if known. */
  sources(
    graphId: string,
    wait = true,
  ): { file: string | null; static: () => Promise<StaticSchemas | null> | StaticSchemas | null } {
    return { file: this.fileOf(graphId), static: () => (wait ? this.get(graphId) : this.peek(graphId)) };
  }

  /** The static schemas only if already known (for answers that must not wait for the checker). */
  peek(graphId: string): StaticSchemas | null {
    return this.memory.get(graphId) ?? this.fromDisk(graphId) ?? null;
  }

  /** Derives, in the background and in one checker program, the schemas of every graph not cached yet. */
  warm(graphIds: string[]): void {
    const missing = graphIds.filter(
      (id) => !this.memory.has(id) && !this.inFlight.has(id) && this.fromDisk(id) === undefined,
    );
    if (missing.length) this.extract(missing);
  }

  /** Ends extractions in flight (their graphs answer without static schemas). */
  close(): void {
    for (const c of this.children) c.kill("SIGKILL");
  }

  private key(graphId: string): string | null {
    let k = this.keys.get(graphId);
    if (k) return k;
    const g = this.graphs.find((x) => x.graphId === graphId && x.runtime === "js");
    if (!g) return null;
    k = schemaCacheKey({
      projectDir: this.projectDir,
      file: g.file,
      exportName: g.exportName,
      parserVersion: this.version,
    });
    this.keys.set(graphId, k);
    return k;
  }

  /** The cached result (null: derived before and unreadable), or undefined when not cached. */
  private fromDisk(graphId: string): StaticSchemas | null | undefined {
    const k = this.key(graphId);
    if (!k) {
      this.memory.set(graphId, null); // not a JavaScript graph of this project: nothing to derive
      return null;
    }
    try {
      const value = JSON.parse(fs.readFileSync(path.join(this.dir, `${k}.json`), "utf8")) as {
        schemas: StaticSchemas | null;
      };
      this.memory.set(graphId, value.schemas);
      return value.schemas;
    } catch {
      return undefined; // not derived yet (or a torn file from a killed process): derive again
    }
  }

  private extract(graphIds: string[]): Map<string, Promise<StaticSchemas | null>> {
    const out = new Map<string, Promise<StaticSchemas | null>>();
    const todo = graphIds.filter((id) => {
      if (this.fromDisk(id) === undefined) return true;
      out.set(id, Promise.resolve(this.memory.get(id)!));
      return false;
    });
    if (!todo.length) return out;
    const specs = Object.fromEntries(
      todo.flatMap((id) => {
        const g = this.graphs.find((x) => x.graphId === id && x.runtime === "js");
        return g ? [[id, { sourceFile: g.file, exportSymbol: g.exportName }]] : [];
      }),
    );
    const started = Date.now();
    const all = runChild(specs, this.projectDir, this.children).then(
      (result) => {
        this.log.info({ graphs: todo, ms: Date.now() - started }, "graph schemas derived from TypeScript types");
        return result;
      },
      (err: Error) => {
        this.log.warn(
          { graphs: todo, err },
          `graph schemas could not be derived from TypeScript types: ${err.message}`,
        );
        return null;
      },
    );
    for (const id of todo) {
      const p = all.then((result) => {
        const schemas = result?.[id] && Object.keys(result[id]).length ? result[id] : null;
        this.memory.set(id, schemas);
        this.inFlight.delete(id);
        // A failed run (timeout, crash) is not cached: the next start tries again.
        if (result) this.save(id, schemas);
        return schemas;
      });
      this.inFlight.set(id, p);
      out.set(id, p);
    }
    return out;
  }

  private save(graphId: string, schemas: StaticSchemas | null): void {
    const k = this.key(graphId);
    if (!k) return;
    try {
      fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
      const tmp = path.join(this.dir, `${k}.${process.pid}.tmp`);
      fs.writeFileSync(tmp, JSON.stringify({ graphId, schemas }));
      fs.renameSync(tmp, path.join(this.dir, `${k}.json`));
    } catch (err) {
      this.log.warn(
        { graphId, err },
        "graph schemas could not be cached on disk; they are derived again at the next start",
      );
    }
  }
}

/** Runs the extraction child and parses its answer. */
function runChild(
  specs: Record<string, unknown>,
  cwd: string,
  children: Set<ChildProcess>,
): Promise<Record<string, StaticSchemas>> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fileURLToPath(CHILD)], { cwd, stdio: ["pipe", "pipe", "pipe"] });
    children.add(child);
    const out: Buffer[] = [];
    let err = "";
    child.stdout.on("data", (c: Buffer) => out.push(c));
    child.stderr.on("data", (c: Buffer) => {
      if (err.length < 64_000) err += c.toString("utf8");
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), EXTRACT_TIMEOUT_MS);
    timer.unref();
    child.once("error", (e) => {
      clearTimeout(timer);
      reject(new Error(`cannot start the schema extractor: ${e.message}`, { cause: e }));
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      children.delete(child);
      if (code !== 0)
        return reject(
          new Error(
            `the schema extractor ended with ${signal ?? `code ${code}`}: ${err.trim().split("\n").slice(-5).join(" | ")}`,
          ),
        );
      try {
        resolve(JSON.parse(Buffer.concat(out).toString("utf8")) as Record<string, StaticSchemas>);
      } catch (e) {
        reject(new Error("the schema extractor answered no JSON", { cause: e }));
      }
    });
    child.stdin.end(JSON.stringify(specs));
  });
}
