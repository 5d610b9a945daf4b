// Which test file starts next, and the file of measured durations it is decided from (pure
// functions, table-tested in test/config/test-schedule.test.ts; the runner is scripts/run-tests.mjs).

/** Seconds assumed for a file never measured: about a typical file's, so it neither starts first nor last. */
export const UNMEASURED_SECONDS = 10;

/**
 * Longest first: with a few files at a time, a long file that starts late is the run's tail, while
 * short files fill the gaps the long ones leave. Ties (and unmeasured files) keep path order, so
 * two runs start the same files in the same order.
 */
export function scheduleOrder(files, seconds) {
  const estimate = (f) => seconds.get(f) ?? UNMEASURED_SECONDS;
  return [...files].sort((a, b) => estimate(b) - estimate(a) || (a < b ? -1 : a > b ? 1 : 0));
}

/** `test/file-durations.txt`: one `<seconds> <path>` a line; `#` comments and malformed lines are ignored. */
export function parseDurations(text) {
  const out = new Map();
  for (const line of text.split("\n")) {
    const m = /^\s*(\d+(?:\.\d+)?)\s+(\S+)\s*$/.exec(line);
    if (m) out.set(m[2], Number(m[1]));
  }
  return out;
}

/** The file again with this run's measurements replacing or adding theirs (slowest first, whole seconds). */
export function formatDurations(previous, measured, header) {
  const all = new Map([...previous, ...measured]);
  const rows = [...all]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1))
    .map(([f, s]) => `${Math.max(1, Math.round(s))} ${f}`);
  return `${header}\n${rows.join("\n")}\n`;
}

/**
 * The summary line counts of one file's spec report (`ℹ pass 3` …); absent counts are 0.
 */
export function reportCounts(report) {
  const count = (name) => Number(new RegExp(`^ℹ ${name} (\\d+)$`, "m").exec(report)?.[1] ?? 0);
  return { passed: count("pass"), failed: count("fail"), skipped: count("skipped"), todo: count("todo") };
}
