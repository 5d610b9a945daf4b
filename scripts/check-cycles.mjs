#!/usr/bin/env node
// Import cycles in src/ (what eslint's import/no-cycle checks, without the plugin): part of `npm run
// lint`. Only imports that load a module count (`import type` and `export type` are erased). A cycle
// already known is listed in KNOWN and reported, not failed; a new one fails, and a known one that is
// gone must leave the list, so the list only shrinks.
import fs from "node:fs";
import path from "node:path";

const root = path.join(path.dirname(new URL(import.meta.url).pathname), "..");
const src = path.join(root, "src");

// Each cycle as its modules (paths under src/), sorted: a strongly connected group of modules.
const KNOWN = [];

const walk = (d) =>
  fs
    .readdirSync(d, { withFileTypes: true })
    .flatMap((e) =>
      e.isDirectory() ? walk(path.join(d, e.name)) : e.name.endsWith(".ts") ? [path.join(d, e.name)] : [],
    );
const files = walk(src);
const edges = new Map();
// Static imports and re-exports that load the module; `import type {…}`/`export type {…}` do not.
const re = /^\s*(import|export)\s+(type\s+)?(?:[^"';]*?\s+from\s+)?["'](\.{1,2}\/[^"']+)["']/gm;
for (const f of files) {
  const text = fs.readFileSync(f, "utf8");
  const out = new Set();
  for (const m of text.matchAll(re)) {
    if (m[2]) continue;
    // `import { type A, type B } from` loads nothing either (verbatimModuleSyntax would keep it, tsx drops it).
    if (/^\s*import\s+\{\s*(type\s+[^,}]+,?\s*)+\}\s+from/.test(m[0])) continue;
    const target = path.resolve(path.dirname(f), m[3]);
    if (fs.existsSync(target)) out.add(target);
  }
  edges.set(f, out);
}

// Tarjan's strongly connected components: every group of two or more modules is a cycle.
let index = 0;
const idx = new Map(),
  low = new Map(),
  stack = [],
  on = new Set(),
  groups = [];
function visit(v) {
  idx.set(v, index);
  low.set(v, index++);
  stack.push(v);
  on.add(v);
  for (const w of edges.get(v) ?? []) {
    if (!idx.has(w)) {
      visit(w);
      low.set(v, Math.min(low.get(v), low.get(w)));
    } else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
  }
  if (low.get(v) !== idx.get(v)) return;
  const g = [];
  for (;;) {
    const w = stack.pop();
    on.delete(w);
    g.push(w);
    if (w === v) break;
  }
  if (g.length > 1) groups.push(g.map((x) => path.relative(src, x)).sort());
}
for (const f of files) if (!idx.has(f)) visit(f);

const key = (g) => g.join(" ");
const known = new Set(KNOWN.map((g) => key([...g].sort())));
const found = new Set(groups.map(key));
const added = groups.filter((g) => !known.has(key(g)));
const gone = KNOWN.filter((g) => !found.has(key([...g].sort())));
for (const g of groups.filter((g) => known.has(key(g)))) console.log(`known import cycle: ${g.join(" ↔ ")}`);
for (const g of added) console.error(`new import cycle: ${g.join(" ↔ ")}`);
for (const g of gone)
  console.error(`import cycle gone, remove it from KNOWN in scripts/check-cycles.mjs: ${g.join(" ↔ ")}`);
if (added.length || gone.length) process.exit(1);
console.log(`import cycles: ${files.length} modules, ${groups.length} known cycle(s), none new`);
