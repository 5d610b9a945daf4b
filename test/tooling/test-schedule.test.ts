import assert from "node:assert/strict";
import { test } from "node:test";
import {
  estimateOf,
  formatDurations,
  HEAVY_CORES,
  nextFile,
  parseDurations,
  reportCounts,
  scheduleOrder,
  slotsOf,
  UNMEASURED_SECONDS,
} from "../../scripts/test-schedule.mjs";

test("test files start longest first; unmeasured ones count as a typical file; ties keep path order", () => {
  const rows: Array<{ files: string[]; seconds: Array<[string, number]>; want: string[] }> = [
    { files: [], seconds: [], want: [] },
    { files: ["a", "b", "c"], seconds: [], want: ["a", "b", "c"] },
    {
      files: ["a", "b", "c"],
      seconds: [
        ["c", 200],
        ["a", 3],
      ],
      want: ["c", "b", "a"],
    },
    {
      files: ["b", "a"],
      seconds: [
        ["a", 50],
        ["b", 50],
      ],
      want: ["a", "b"],
    },
    {
      files: ["x", "long"],
      seconds: [
        ["long", UNMEASURED_SECONDS + 1],
        ["gone", 999],
      ],
      want: ["long", "x"],
    },
  ];
  for (const r of rows) assert.deepEqual(scheduleOrder(r.files, new Map(r.seconds)), r.want, JSON.stringify(r));
});

test("the durations file: read back what was written, comments and malformed lines ignored, new figures win", () => {
  const text = "# header\n12 test/a.test.ts\n\nnot a line\n3.5 test/b.test.ts 7\n";
  assert.deepEqual(
    [...parseDurations(text)],
    [
      ["test/a.test.ts", { seconds: 12 }],
      ["test/b.test.ts", { seconds: 3.5, cpu: 7 }],
    ],
  );
  const out = formatDurations(
    parseDurations(text),
    new Map([
      ["test/b.test.ts", { seconds: 40.4, cpu: 20.6 }],
      ["test/c.test.ts", { seconds: 0.2 }],
    ]),
    "# h",
  );
  assert.equal(out, "# h\n40 test/b.test.ts 21\n12 test/a.test.ts\n1 test/c.test.ts\n");
  assert.deepEqual(
    [...parseDurations(out)],
    [
      ["test/b.test.ts", { seconds: 40, cpu: 21 }],
      ["test/a.test.ts", { seconds: 12 }],
      ["test/c.test.ts", { seconds: 1 }],
    ],
  );
  assert.deepEqual(scheduleOrder(["test/a.test.ts", "test/b.test.ts"], parseDurations(out)), [
    "test/b.test.ts",
    "test/a.test.ts",
  ]);
});

test("a file that kept a core busy takes two slots; unmeasured CPU, one; never all of them", () => {
  const rows: Array<{ time: { seconds: number; cpu?: number } | undefined; capacity: number; want: number }> = [
    { time: undefined, capacity: 3, want: 1 },
    { time: { seconds: 100 }, capacity: 3, want: 1 },
    { time: { seconds: 100, cpu: 40 }, capacity: 3, want: 1 },
    { time: { seconds: 100, cpu: HEAVY_CORES * 100 }, capacity: 3, want: 2 },
    { time: { seconds: 100, cpu: 150 }, capacity: 3, want: 2 },
    { time: { seconds: 100, cpu: 150 }, capacity: 2, want: 1 },
    { time: { seconds: 100, cpu: 150 }, capacity: 1, want: 1 },
  ];
  for (const r of rows) assert.equal(slotsOf(r.time, r.capacity), r.want, JSON.stringify(r));
});

test("the next file is the first in schedule order, held back (no shorter file past it) until it fits", () => {
  const slots = (f: string) => (f.startsWith("heavy") ? 2 : 1);
  assert.equal(nextFile([], 3, slots), undefined);
  assert.equal(nextFile(["heavy", "light"], 2, slots), "heavy");
  assert.equal(nextFile(["heavy", "light"], 1, slots), undefined);
  assert.equal(nextFile(["light", "heavy"], 1, slots), "light");
  assert.equal(nextFile(["light"], 0, slots), undefined);
});

test("a file that does not fit yet lets a later file start only if that one ends before a slot frees anyway", () => {
  const slots = (f: string) => (f.startsWith("heavy") ? 2 : 1);
  const seconds = new Map([
    ["heavy", { seconds: 90, cpu: 90 }],
    ["light-long", { seconds: 60 }],
    ["light-short", { seconds: 5 }],
  ]);
  const estimate = estimateOf(seconds);
  const queue = ["heavy", "light-long", "light-short"];
  assert.equal(nextFile(queue, 1, slots, estimate, 30), "light-short");
  assert.equal(nextFile(queue, 1, slots, estimate, 4), undefined);
  assert.equal(nextFile(queue, 1, slots, estimate, 60), "light-long");
  assert.equal(nextFile(queue, 2, slots, estimate, 0), "heavy");
  assert.equal(estimateOf(new Map())("unmeasured"), UNMEASURED_SECONDS);
});

test("a file's spec report summary: its counts, 0 when absent", () => {
  const report = "✔ x (1ms)\nℹ tests 4\nℹ pass 2\nℹ fail 1\nℹ skipped 1\nℹ todo 0\n";
  assert.deepEqual(reportCounts(report), { passed: 2, failed: 1, skipped: 1, todo: 0 });
  assert.deepEqual(reportCounts(""), { passed: 0, failed: 0, skipped: 0, todo: 0 });
});
