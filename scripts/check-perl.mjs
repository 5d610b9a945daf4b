#!/usr/bin/env node
// `perl -c` on every Perl file of the package (the confinement's root helpers): part of `npm run
// lint`, so a syntax error fails before any test that needs root would find it.
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";

const dir = path.join(path.dirname(new URL(import.meta.url).pathname), "..", "src", "confinement", "perl");
const files = fs
  .readdirSync(dir)
  .filter((f) => f.endsWith(".pl"))
  .sort();
let failed = 0;
for (const f of files) {
  try {
    execFileSync("perl", ["-c", path.join(dir, f)], { stdio: ["ignore", "ignore", "pipe"] });
  } catch (err) {
    failed++;
    process.stderr.write(`${f}: ${err.stderr?.toString() || err.message}\n`);
  }
}
if (failed) process.exit(1);
console.log(`perl -c: ${files.length} files OK`);
