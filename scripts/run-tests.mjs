#!/usr/bin/env node
// Runs every test file under test/ with Node's test runner (TypeScript through tsx).
// In strict mode (CI=true or WHARF_STRICT=1) a skipped or todo test fails the run: CI must prove
// that root, namespaces and PostgreSQL tests really ran.
import { execFileSync, spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  estimateOf,
  formatDurations,
  nextFile,
  parseDurations,
  reportCounts,
  scheduleOrder,
  slotsOf,
} from "./test-schedule.mjs";

const strict = process.env.CI === "true" || process.env.WHARF_STRICT === "1";
// `--unit`: only the fast tier listed in test/unit-tier.txt (pure tests, seconds, no root).
const unit = process.argv.includes("--unit");
const filters = process.argv.slice(2).filter((a) => !a.startsWith("--"));

function findTests(dir) {
  const out = [];
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...findTests(p));
    else if (/\.test\.ts$/.test(entry.name)) out.push(p);
  }
  return out.sort();
}

const unitTier = () => {
  const listed = fs
    .readFileSync("test/unit-tier.txt", "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l && !l.startsWith("#"));
  const missing = listed.filter((f) => !fs.existsSync(f));
  if (missing.length) {
    console.error(`test/unit-tier.txt names files that do not exist: ${missing.join(", ")}`);
    process.exit(1);
  }
  return listed.map((f) => path.normalize(f)).sort();
};
const files = (unit ? unitTier() : findTests("test")).filter(
  (f) => filters.length === 0 || filters.some((x) => f.includes(x)),
);
if (files.length === 0) {
  console.error("no test files matched");
  process.exit(1);
}
// Slots: a file takes one, or (with three slots or more) two when it kept a core busy in the last
// recorded run (see `slotsOf`). Most files mostly wait on their peers, so three slots would keep CI's
// two cores busier; two stay the default until a full strict run on a quiet machine shows three
// as steady.
const concurrency = Math.max(1, Number(process.env.WHARF_TEST_CONCURRENCY) || 2);
// Every file in a test runner of its own (one process per file, as `--test` does anyway), started
// by this script rather than by one `--test` over all files: it starts the longest files first,
// from the durations measured last (test/file-durations.txt), and it knows each file's duration and
// the CPU time its processes took.
const fileArgs = [
  "--import",
  "tsx",
  "--test",
  // A test file whose tests have all finished exits even if a library left a handle open (an HTTP/2
  // session, a gRPC channel): one leaked handle must not stall the whole run until CI's deadline.
  "--test-force-exit",
  // A test that hangs (a peer that never answers) fails after 10 minutes instead of holding the whole
  // run until CI's deadline. The limit also applies to a whole file, and the files that build Python
  // environments for several deployments take several minutes on a loaded 2-core machine.
  "--test-timeout=600000",
  "--test-reporter=spec",
  "--test-reporter-destination=stdout",
];
const DURATIONS = "test/file-durations.txt";
// `--record-durations`: this run's per-file durations replace the file's (commit it after a full run).
const record = process.argv.includes("--record-durations");
const DURATIONS_HEADER = [
  "# Seconds each test file took in the last recorded run (`node scripts/run-tests.mjs --record-durations`),",
  "# slowest first: the runner starts the longest files first. Files not listed count as a typical file.",
  "# A third figure is the CPU seconds the file's processes took: a file that kept a core busy takes two slots.",
].join("\n");
const known = fs.existsSync(DURATIONS) ? parseDurations(fs.readFileSync(DURATIONS, "utf8")) : new Map();
// Every test platform would otherwise assemble its own sandbox base image in its temporary home;
// one shared cache (builders rename atomically into place) keeps that to once per machine.
const baseCache = process.env.WHARF_SANDBOX_BASE_CACHE || path.join(os.tmpdir(), "wharf-test-base-images");
const env = {
  ...process.env,
  WHARF_STRICT: strict ? "1" : (process.env.WHARF_STRICT ?? ""),
  WHARF_SANDBOX_BASE_CACHE: baseCache,
};
// The fast tier creates no Python environment: on a clean clone it must not wait for uv's download.
const uvBin = unit ? null : sharedUv();
if (uvBin) Object.assign(env, { PATH: `${uvBin}:${env.PATH ?? ""}`, WHARF_TEST_UV_BIN: uvBin });

/**
 * The Python environments tests create on the host (the agent server's per project, the official
 * client's) install with uv when it is on PATH (`pip_installer: "auto"`): seconds each instead of
 * a minute or more with pip on a loaded machine, from uv's own cache shared by every test file. uv
 * is fetched from PyPI once per machine into the tests' shared Python cache (the Python templates
 * test uses the same one). Confined deployment builds keep their own PATH, so they still install
 * with pip; python-builds.test.ts takes this uv off PATH to test fetching it. Without python3 or
 * PyPI, nothing changes: environments install with pip.
 */
function sharedUv() {
  const onPath = (process.env.PATH ?? "").split(":").some((d) => d && fs.existsSync(path.join(d, "uv")));
  if (onPath) return null;
  const envs = process.env.WHARF_TEST_PYTHON_ENVS || path.join(os.tmpdir(), "wharf-test-python-envs");
  const tool = path.join(envs, "uv-tool");
  const bin = path.join(tool, "bin");
  if (fs.existsSync(path.join(bin, "uv"))) return bin;
  try {
    fs.mkdirSync(envs, { recursive: true });
    const staging = fs.mkdtempSync(`${tool}.`);
    execFileSync(
      process.env.WHARF_PYTHON || "python3",
      ["-m", "pip", "install", "--quiet", "--target", staging, "uv"],
      { stdio: ["ignore", "ignore", "pipe"], timeout: 300_000 },
    );
    try {
      fs.renameSync(staging, tool);
    } catch {
      // Another run put it in place meanwhile: that one serves.
      fs.rmSync(staging, { recursive: true, force: true });
    }
    return fs.existsSync(path.join(bin, "uv")) ? bin : null;
  } catch (err) {
    console.error(
      `uv could not be fetched (${String(err.stderr ?? err.message)
        .trim()
        .split("\n")
        .pop()}): Python environments install with pip`,
    );
    return null;
  }
}
const started = Date.now();
const measured = new Map();
const results = [];
const queue = scheduleOrder(files, known);
const slots = (f) => slotsOf(known.get(f), concurrency);
const estimate = estimateOf(known);
console.log(`${files.length} test file(s), ${concurrency} slot(s), longest first`);
let childrenCpu = reapedChildrenCpu();
await runAll();
summarise();

/** Starts files in schedule order while their slots are free; resolves when every file has ended. */
function runAll() {
  return new Promise((resolve) => {
    let free = concurrency;
    const running = new Map();
    // Seconds until the first running file is expected to end (by its recorded duration).
    const horizon = () =>
      Math.max(0, Math.min(...[...running].map(([f, t0]) => estimate(f) - (Date.now() - t0) / 1000)));
    const fill = () => {
      for (;;) {
        const f = nextFile(queue, free, slots, estimate, horizon());
        if (f === undefined) break;
        queue.splice(queue.indexOf(f), 1);
        const n = slots(f);
        free -= n;
        running.set(f, Date.now());
        runFile(f).then((r) => {
          results.push(r);
          free += n;
          running.delete(f);
          fill();
        });
      }
      if (running.size === 0 && queue.length === 0) resolve();
    };
    fill();
  });
}

/**
 * CPU seconds of every child this process has reaped, with their own reaped descendants (Linux's
 * cutime + cstime): read when a file's runner exits, the growth since the last reading is that
 * file's (its platforms, agent servers, browsers, Python builds). Null where /proc is not there.
 */
function reapedChildrenCpu() {
  try {
    // Fields after the command name (which may hold spaces), from the state on: cutime is field 16.
    const fields = fs.readFileSync("/proc/self/stat", "utf8").split(") ")[1].split(" ");
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    // Not Linux: files are scheduled by their durations alone.
    return null;
  }
}

/**
 * One file in its own test runner, its report printed whole when it ends (files running side by
 * side would otherwise interleave their lines).
 */
function runFile(file) {
  const t0 = Date.now();
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [...fileArgs, file], { stdio: ["ignore", "pipe", "pipe"], env });
    let report = "";
    let errors = "";
    child.stdout.setEncoding("utf8");
    child.stderr.setEncoding("utf8");
    child.stdout.on("data", (chunk) => {
      report += chunk;
    });
    child.stderr.on("data", (chunk) => {
      errors += chunk;
    });
    // "close" waits for the end of the report; a process a test leaked may still hold the pipes open,
    // so the file's exit starts a short grace period instead of waiting for that forever.
    let ended = false;
    child.stdout.once("end", () => {
      ended = true;
    });
    let cpu;
    const done = (code, signal) => {
      const seconds = (Date.now() - t0) / 1000;
      measured.set(file, cpu === undefined ? { seconds } : { seconds, cpu });
      const ok = code === 0 && !signal;
      const cpuNote = cpu === undefined ? "" : `, ${cpu.toFixed(1)} s CPU`;
      process.stdout.write(
        `\n── ${file} (${seconds.toFixed(1)} s${cpuNote}${ok ? "" : `, exit ${code ?? signal}`})\n${report}`,
      );
      if (errors) process.stderr.write(errors);
      resolve({ file, ok, report, seconds });
    };
    child.on("exit", (code, signal) => {
      // Reaped just now: the growth since the last reading is this file's (a file that ended in the
      // same instant may add its share: rare, and it only shifts which files count as heavy).
      const now = reapedChildrenCpu();
      if (now !== null && childrenCpu !== null) cpu = now - childrenCpu;
      childrenCpu = now;
      if (ended) return done(code, signal);
      const timer = setTimeout(() => {
        child.stdout.destroy();
        child.stderr.destroy();
        done(code, signal);
      }, 5000);
      child.stdout.once("end", () => {
        clearTimeout(timer);
        done(code, signal);
      });
    });
  });
}

function summarise() {
  const total = { passed: 0, failed: 0, skipped: 0, todo: 0 };
  for (const r of results) for (const [k, v] of Object.entries(reportCounts(r.report))) total[k] += v;
  const failedFiles = results.filter((r) => !r.ok).map((r) => r.file);
  const slowest = [...measured].sort((a, b) => b[1].seconds - a[1].seconds).slice(0, 15);
  const row = ([f, t]) =>
    `  ${t.seconds.toFixed(1).padStart(6)} s  ${t.cpu === undefined ? "" : `${t.cpu.toFixed(1).padStart(6)} s CPU  `}${f}`;
  console.log(`\nslowest files:\n${slowest.map(row).join("\n")}`);
  console.log(
    `\n${total.passed} passed, ${total.failed} failed, ${total.skipped} skipped in ${((Date.now() - started) / 60000).toFixed(1)} min (${results.length} files, ${concurrency} slots)`,
  );
  if (failedFiles.length) console.log(`files that failed:\n${failedFiles.map((f) => `  ${f}`).join("\n")}`);
  if (record) {
    fs.writeFileSync(DURATIONS, formatDurations(known, measured, DURATIONS_HEADER));
    console.log(`durations written to ${DURATIONS}`);
  }
  if (strict && (total.skipped > 0 || total.todo > 0)) {
    const names = results.flatMap((r) => [...r.report.matchAll(/^\s*﹣ (.*)$/gm)].map((m) => `  ${m[1]}`));
    console.error(
      `strict mode: ${total.skipped + total.todo} test(s) skipped; in CI every test must run:\n${names.join("\n")}`,
    );
    process.exit(1);
  }
  process.exit(failedFiles.length ? 1 : 0);
}
