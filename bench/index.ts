// `npm run bench`: lists the benchmarks; `npm run bench -- NAME [args]` runs bench/NAME.ts with its
// arguments (e.g. `npm run bench -- agent-server-runs --quick`), as `node bin/run-ts.js bench/NAME.ts` does.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const dir = path.dirname(fileURLToPath(import.meta.url));
// Helpers other benchmarks import, not benchmarks of their own.
const HELPERS = new Set(["index", "lean-client", "python-echo-run"]);

function benchmarks(): string[] {
  return fs
    .readdirSync(dir)
    .filter((f) => f.endsWith(".ts"))
    .map((f) => f.slice(0, -3))
    .filter((name) => !HELPERS.has(name))
    .sort();
}

const [name, ...args] = process.argv.slice(2);
if (!name || !benchmarks().includes(name)) {
  if (name) console.error(`no benchmark named ${JSON.stringify(name)}`);
  console.log("usage: npm run bench -- NAME [args]   (each file's first comment says what it measures)");
  for (const b of benchmarks()) console.log(`  ${b}`);
  process.exit(name ? 2 : 0);
}
process.argv = [process.argv[0], path.join(dir, `${name}.ts`), ...args];
await import(pathToFileURL(path.join(dir, `${name}.ts`)).href);
