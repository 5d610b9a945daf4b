import assert from "node:assert/strict";
import { test } from "node:test";
import {
  formatDurations,
  parseDurations,
  reportCounts,
  scheduleOrder,
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
  const text = "# header\n12 test/a.test.ts\n\nnot a line\n3.5 test/b.test.ts\n";
  assert.deepEqual(
    [...parseDurations(text)],
    [
      ["test/a.test.ts", 12],
      ["test/b.test.ts", 3.5],
    ],
  );
  const out = formatDurations(
    parseDurations(text),
    new Map([
      ["test/b.test.ts", 40.4],
      ["test/c.test.ts", 0.2],
    ]),
    "# h",
  );
  assert.equal(out, "# h\n40 test/b.test.ts\n12 test/a.test.ts\n1 test/c.test.ts\n");
  assert.deepEqual(
    [...parseDurations(out)],
    [
      ["test/b.test.ts", 40],
      ["test/a.test.ts", 12],
      ["test/c.test.ts", 1],
    ],
  );
});

test("a file's spec report summary: its counts, 0 when absent", () => {
  const report = "✔ x (1ms)\nℹ tests 4\nℹ pass 2\nℹ fail 1\nℹ skipped 1\nℹ todo 0\n";
  assert.deepEqual(reportCounts(report), { passed: 2, failed: 1, skipped: 1, todo: 0 });
  assert.deepEqual(reportCounts(""), { passed: 0, failed: 0, skipped: 0, todo: 0 });
});
