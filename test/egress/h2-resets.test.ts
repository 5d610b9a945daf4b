// The rapid-reset decision: a session is closed past the limit of peer-aborted streams per window.
import assert from "node:assert/strict";
import { test } from "node:test";
import { ResetCounter } from "../../src/egress/proxy/h2-resets.ts";

test("reset counter: past the limit within one window closes; a new window starts over", () => {
  const rows: Array<{ name: string; limit: number; times: number[]; want: boolean[] }> = [
    { name: "under the limit", limit: 3, times: [0, 10, 20], want: [false, false, false] },
    { name: "one past the limit", limit: 3, times: [0, 10, 20, 30], want: [false, false, false, true] },
    {
      name: "spread over windows",
      limit: 2,
      times: [0, 500, 1000, 1500, 2000],
      want: [false, false, false, false, false],
    },
    { name: "burst after a quiet window", limit: 2, times: [0, 1000, 1001, 1002], want: [false, false, false, true] },
  ];
  for (const r of rows) {
    const c = new ResetCounter(r.limit, 1000);
    assert.deepEqual(
      r.times.map((t) => c.hit(t)),
      r.want,
      r.name,
    );
  }
});
