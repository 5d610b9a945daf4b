#!/usr/bin/env node
// Runs every test file under test/ with Node's test runner (TypeScript through tsx).
// In strict mode (CI=true or WHARF_STRICT=1) a skipped or todo test fails the run: CI must prove
// that root, namespaces and PostgreSQL tests really ran.
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const strict = process.env.CI === "true" || process.env.WHARF_STRICT === "1";
const filters = process.argv.slice(2);

function findTests(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...findTests(p));
    else if (/\.test\.ts$/.test(entry.name)) out.push(p);
  }
  return out.sort();
}

const files = findTests("test").filter((f) => filters.length === 0 || filters.some((x) => f.includes(x)));
if (files.length === 0) {
  console.error("no test files matched");
  process.exit(1);
}
const tapFile = path.join(os.tmpdir(), `wharf-tests-${process.pid}.tap`);
const args = [
  "--import", "tsx",
  "--test",
  "--test-concurrency=2",
  "--test-reporter=spec", "--test-reporter-destination=stdout",
  "--test-reporter=tap", `--test-reporter-destination=${tapFile}`,
  ...files,
];
// Every test platform would otherwise assemble its own sandbox base image in its temporary home;
// one shared cache (builders rename atomically into place) keeps that to once per machine.
const baseCache = process.env.WHARF_SANDBOX_BASE_CACHE || path.join(os.tmpdir(), "wharf-test-base-images");
const env = { ...process.env, WHARF_STRICT: strict ? "1" : process.env.WHARF_STRICT ?? "", WHARF_SANDBOX_BASE_CACHE: baseCache };
const child = spawn(process.execPath, args, { stdio: ["ignore", "inherit", "inherit"], env });
child.on("exit", (code, signal) => {
  let tap = "";
  try { tap = fs.readFileSync(tapFile, "utf8"); fs.rmSync(tapFile); } catch { /* no report */ }
  const count = (name) => Number(new RegExp(`^# ${name} (\\d+)$`, "m").exec(tap)?.[1] ?? 0);
  const passed = count("pass"), failed = count("fail"), skipped = count("skipped"), todo = count("todo");
  console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
  if (strict && (skipped > 0 || todo > 0)) {
    const names = [...tap.matchAll(/^\s*ok \d+ - (.*) # (SKIP|TODO)(.*)$/gm)].map((m) => `  ${m[1]} (${m[2]}${m[3]})`);
    console.error(`strict mode: ${skipped + todo} test(s) skipped; in CI every test must run:\n${names.join("\n")}`);
    process.exit(1);
  }
  process.exit(code ?? (signal ? 1 : 0));
});
