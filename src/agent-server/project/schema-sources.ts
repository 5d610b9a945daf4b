import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";

/**
 * Relative module specifiers a TypeScript/JavaScript source imports or re-exports (pure: table-
 * tested). Packages are left out: their types change with the lockfile, which is hashed instead.
 */
export function localImports(source: string): string[] {
  const out = new Set<string>();
  const re = /(?:\bfrom\s*|\bimport\s*\(?\s*|\brequire\s*\(\s*)["'](\.{1,2}\/[^"']+)["']/g;
  for (const m of source.matchAll(re)) out.add(m[1]);
  return [...out];
}

/** The files a relative specifier may name, in the order TypeScript tries them (pure). */
export function candidateFiles(fromFile: string, specifier: string): string[] {
  const base = path.resolve(path.dirname(fromFile), specifier);
  const js = /\.(m|c)?jsx?$/.exec(base);
  if (js) {
    const stem = base.slice(0, -js[0].length);
    const ts = js[1] === "m" ? ".mts" : js[1] === "c" ? ".cts" : js[0].endsWith("x") ? ".tsx" : ".ts";
    return [stem + ts, base];
  }
  if (/\.(m|c)?tsx?$/.test(base)) return [base];
  return [".ts", ".tsx", ".mts", ".js", ".mjs", "/index.ts", "/index.js"].map((ext) => base + ext);
}

/**
 * What a graph's derived schemas depend on: the graph file, the local files it imports
 * (transitively, within the project), the project's tsconfig and lockfile, and the parser's
 * version. Their hash keys the cache, so an edit to any of them derives the schemas again.
 */
export function schemaCacheKey(input: {
  projectDir: string;
  file: string;
  exportName: string;
  parserVersion: string;
}): string {
  const hash = crypto.createHash("sha256").update(`${input.parserVersion}\0${input.exportName}\0`);
  const seen = new Set<string>();
  const queue = [input.file];
  // A project of thousands of files is hashed partially rather than slowly; the graph file always is.
  while (queue.length && seen.size < 500) {
    const file = queue.shift()!;
    if (seen.has(file)) continue;
    seen.add(file);
    let text: string;
    try {
      text = fs.readFileSync(file, "utf8");
    } catch {
      continue; // a specifier that names no file here (a type-only path alias): nothing to hash
    }
    hash.update(`${path.relative(input.projectDir, file)}\0${text}\0`);
    for (const spec of localImports(text)) {
      const found = candidateFiles(file, spec).find(
        (f) => f.startsWith(input.projectDir + path.sep) && fs.existsSync(f) && fs.statSync(f).isFile(),
      );
      if (found) queue.push(found);
    }
  }
  for (const name of ["tsconfig.json", "package-lock.json", "pnpm-lock.yaml", "yarn.lock", "bun.lock"]) {
    const f = path.join(input.projectDir, name);
    if (fs.existsSync(f)) hash.update(`${name}\0${fs.readFileSync(f)}\0`);
  }
  return hash.digest("hex").slice(0, 32);
}
