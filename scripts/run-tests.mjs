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
const args = [
  "--import", "tsx",
  "--test",
  "--test-concurrency=2",
  // A test file whose tests have all finished exits even if a library left a handle open (an HTTP/2
  // session, a gRPC channel): one leaked handle must not stall the whole run until CI's deadline.
  "--test-force-exit",
  // A test that hangs (a peer that never answers) fails after 5 minutes instead of holding the whole
  // run until CI's deadline; the slowest tests take about a minute.
  "--test-timeout=300000",
  "--test-reporter=spec", "--test-reporter-destination=stdout",
  ...files,
];
// Every test platform would otherwise assemble its own sandbox base image in its temporary home;
// one shared cache (builders rename atomically into place) keeps that to once per machine.
const baseCache = process.env.WHARF_SANDBOX_BASE_CACHE || path.join(os.tmpdir(), "wharf-test-base-images");
const env = { ...process.env, WHARF_STRICT: strict ? "1" : process.env.WHARF_STRICT ?? "", WHARF_SANDBOX_BASE_CACHE: baseCache };
// The spec report is read back as it passes through: with --test-force-exit the runner exits
// before a file reporter would be flushed, so the summary and the skipped tests' names come from it.
const child = spawn(process.execPath, args, { stdio: ["ignore", "pipe", "inherit"], env });
let report = "";
child.stdout.setEncoding("utf8");
child.stdout.on("data", (chunk) => {
  process.stdout.write(chunk);
  report += chunk;
});
// "close" waits for the end of the report; a process a test leaked may still hold the pipe open, so
// the runner's exit starts a short grace period instead of waiting for that forever.
let ended = false;
child.stdout.once("end", () => { ended = true; });
child.on("exit", (code, signal) => {
  if (ended) return summarise(code, signal);
  const timer = setTimeout(() => summarise(code, signal), 5000);
  child.stdout.once("end", () => { clearTimeout(timer); summarise(code, signal); });
});
function summarise(code, signal) {
  const count = (name) => Number(new RegExp(`^ℹ ${name} (\\d+)$`, "m").exec(report)?.[1] ?? 0);
  const passed = count("pass"), failed = count("fail"), skipped = count("skipped"), todo = count("todo");
  console.log(`\n${passed} passed, ${failed} failed, ${skipped} skipped`);
  if (strict && (skipped > 0 || todo > 0)) {
    const names = [...report.matchAll(/^\s*﹣ (.*)$/gm)].map((m) => `  ${m[1]}`);
    console.error(`strict mode: ${skipped + todo} test(s) skipped; in CI every test must run:\n${names.join("\n")}`);
    process.exit(1);
  }
  process.exit(code ?? (signal ? 1 : 0));
}
