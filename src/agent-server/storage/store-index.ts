import { pathToFileURL } from "node:url";

/** What `store.index.embed` may export: a function of texts, or a LangChain `Embeddings`. */
export type EmbedTexts = (texts: string[]) => Promise<number[][]>;

export interface StoreIndex {
  dims: number;
  fields: string[];
  embed: EmbedTexts;
}

/** Imports the project's embedding function (`./src/embed.ts:embed`). */
export async function loadEmbed(ref: { file: string; exportName: string }): Promise<EmbedTexts> {
  const where = `store.index.embed (${ref.file}:${ref.exportName})`;
  let value: unknown;
  try {
    value = ((await import(pathToFileURL(ref.file).href)) as Record<string, unknown>)[ref.exportName];
  } catch (err) {
    throw new Error(`cannot load ${where}: ${(err as Error)?.message ?? String(err)}`, { cause: err });
  }
  const e = value as { embedDocuments?: EmbedTexts } | EmbedTexts | undefined;
  if (e && typeof e === "object" && typeof e.embedDocuments === "function") return (texts) => e.embedDocuments!(texts);
  if (typeof e === "function") return async (texts) => (e as EmbedTexts)(texts);
  throw new Error(`cannot load ${where}: expected a function (texts) => vectors or an Embeddings object`);
}

/**
 * The texts of a value to embed, by field path (`$` the whole value; `a.b`; `a[*].b` every element),
 * as the LangGraph store extracts them. A missing field yields nothing. Pure: table-tested.
 */
export function fieldTexts(value: unknown, field: string): string[] {
  if (field === "$") return [typeof value === "string" ? value : JSON.stringify(value)];
  let current: unknown[] = [value];
  for (const part of field.split(".")) {
    const m = /^(.*?)(\[\*\])?$/.exec(part)!;
    const next: unknown[] = [];
    for (const v of current) {
      if (!v || typeof v !== "object") continue;
      const child = (v as Record<string, unknown>)[m[1]];
      if (child === undefined) continue;
      if (m[2]) {
        if (Array.isArray(child)) next.push(...child);
      } else next.push(child);
    }
    current = next;
  }
  return current
    .filter((v) => v !== null && v !== undefined)
    .map((v) => (typeof v === "string" ? v : JSON.stringify(v)));
}

export function cosine(a: number[], b: number[]): number {
  let dot = 0;
  let na = 0;
  let nb = 0;
  for (let i = 0; i < Math.min(a.length, b.length); i++) {
    dot += a[i] * b[i];
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  return na && nb ? dot / Math.sqrt(na * nb) : 0;
}
