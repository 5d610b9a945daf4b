// Which test file starts next, and the file of measured durations it is decided from (pure
// functions, table-tested in test/tooling/test-schedule.test.ts; the runner is scripts/run-tests.mjs).

/** Seconds assumed for a file never measured: about a typical file's, so it neither starts first nor last. */
export const UNMEASURED_SECONDS = 10;

/**
 * A file whose processes kept at least this many cores busy on average (CPU seconds over wall
 * seconds, last recorded run) takes two of the runner's slots: most files mostly wait on their
 * peers (about half a core), so three may share two cores, but two CPU-bound files (Python builds,
 * many CLI processes) beside a third would only slow each other down.
 */
export const HEAVY_CORES = 0.7;

/**
 * Longest first: with a few files at a time, a long file that starts late is the run's tail, while
 * short files fill the gaps the long ones leave. Ties (and unmeasured files) keep path order, so
 * two runs start the same files in the same order. `times` maps a file to `{ seconds, cpu }` (or
 * to its seconds alone).
 */
export function scheduleOrder(files, times) {
  const estimate = estimateOf(times);
  return [...files].sort((a, b) => estimate(b) - estimate(a) || (a < b ? -1 : a > b ? 1 : 0));
}

const secondsOf = (t) => (typeof t === "number" ? t : t?.seconds);

/**
 * How many of the runner's slots a file takes: 2 when it kept a core busy, else 1; never all of them
 * (with two slots every file takes one, as two files at a time always did).
 */
export function slotsOf(time, capacity) {
  const heavy = time && typeof time === "object" && time.cpu !== undefined && time.cpu >= HEAVY_CORES * time.seconds;
  return heavy && capacity >= 3 ? 2 : 1;
}

/**
 * The next file to start from `queue` (in schedule order) with `free` slots: the first one if it
 * fits. If it does not fit yet, its slots are held for it (or short files would keep a long heavy
 * file waiting to the end of the run), except for a file expected to end within `horizon` seconds,
 * when a running file is expected to end anyway and free the slots it waits for.
 */
export function nextFile(queue, free, slots, estimate = () => Infinity, horizon = 0) {
  if (queue.length === 0) return undefined;
  if (slots(queue[0]) <= free) return queue[0];
  return queue.find((f) => slots(f) <= free && estimate(f) <= horizon);
}

/** Seconds a file is expected to take: its recorded seconds, or a typical file's. */
export function estimateOf(times) {
  return (f) => secondsOf(times.get(f)) ?? UNMEASURED_SECONDS;
}

/**
 * `test/file-durations.txt`: one `<seconds> <path> [<cpu seconds>]` a line; `#` comments and
 * malformed lines are ignored. Maps each path to `{ seconds, cpu }` (`cpu` absent when not recorded).
 */
export function parseDurations(text) {
  const out = new Map();
  for (const line of text.split("\n")) {
    const m = /^\s*(\d+(?:\.\d+)?)\s+(\S+)(?:\s+(\d+(?:\.\d+)?))?\s*$/.exec(line);
    if (m) out.set(m[2], m[3] === undefined ? { seconds: Number(m[1]) } : { seconds: Number(m[1]), cpu: Number(m[3]) });
  }
  return out;
}

/** The file again with this run's measurements replacing or adding theirs (slowest first, whole seconds). */
export function formatDurations(previous, measured, header) {
  const all = new Map([...previous, ...measured]);
  const whole = (s) => Math.max(1, Math.round(s));
  const rows = [...all]
    .sort((a, b) => b[1].seconds - a[1].seconds || (a[0] < b[0] ? -1 : 1))
    .map(([f, t]) => `${whole(t.seconds)} ${f}${t.cpu === undefined ? "" : ` ${Math.round(t.cpu)}`}`);
  return `${header}\n${rows.join("\n")}\n`;
}

/**
 * The summary line counts of one file's spec report (`ℹ pass 3` …); absent counts are 0.
 */
export function reportCounts(report) {
  const count = (name) => Number(new RegExp(`^ℹ ${name} (\\d+)$`, "m").exec(report)?.[1] ?? 0);
  return { passed: count("pass"), failed: count("fail"), skipped: count("skipped"), todo: count("todo") };
}
