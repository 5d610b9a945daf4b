import assert from "node:assert/strict";
import { test } from "node:test";
import { admit, type AdmissionLimits, type Commitments } from "../../src/sandboxes/lifecycle/admission.ts";

const GiB = 1024 ** 3;
const host = { memoryBytes: 23 * GiB, diskFreeBytes: 80 * GiB };
const limits: AdmissionLimits = {
  memoryOvercommit: 2,
  diskOvercommit: 1,
  workspaceMaxSandboxes: 3,
  workspaceMaxMemBytes: 16 * GiB,
  workspaceMaxDiskBytes: 100 * GiB,
};
const none: Commitments = {
  host: { runningMemBytes: 0, diskUnwrittenBytes: 0 },
  workspace: { sandboxes: 0, runningMemBytes: 0, diskBytes: 0 },
};
const hostUsed = (mem: number, disk: number): Commitments => ({
  ...none,
  host: { runningMemBytes: mem, diskUnwrittenBytes: disk },
});
const wsUsed = (n: number, mem: number, disk: number): Commitments => ({
  ...none,
  workspace: { sandboxes: n, runningMemBytes: mem, diskBytes: disk },
});

test("admission: what the host can ever give, then the workspace's quotas, then what the host has left", () => {
  const cases: Array<
    [string, { memBytes: number; fsCapacityBytes: number; creates: boolean }, Commitments, number | null, RegExp?]
  > = [
    ["a default sandbox on an idle host", { memBytes: 2 * GiB, fsCapacityBytes: 10 * GiB, creates: true }, none, null],
    [
      "64 GiB of memory on a 23 GiB host",
      { memBytes: 64 * GiB, fsCapacityBytes: 10 * GiB, creates: true },
      none,
      422,
      /mem_bytes 64 GiB is more than this host's memory/,
    ],
    [
      "a 1 TiB disk with 80 GiB free",
      { memBytes: 2 * GiB, fsCapacityBytes: 1024 * GiB, creates: true },
      none,
      422,
      /fs_capacity_bytes 1024 GiB/,
    ],
    [
      "a start does not commit disk again",
      { memBytes: 2 * GiB, fsCapacityBytes: 1024 * GiB, creates: false },
      none,
      null,
    ],
    [
      "the workspace's fourth sandbox",
      { memBytes: 1 * GiB, fsCapacityBytes: 1 * GiB, creates: true },
      wsUsed(3, 0, 0),
      429,
      /^Sandbox count quota/,
    ],
    [
      "a start is not a new sandbox",
      { memBytes: 1 * GiB, fsCapacityBytes: 1 * GiB, creates: false },
      wsUsed(3, 0, 0),
      null,
    ],
    [
      "the workspace's running memory",
      { memBytes: 2 * GiB, fsCapacityBytes: 1 * GiB, creates: false },
      wsUsed(1, 15 * GiB, 0),
      429,
      /^Memory quota exceeded/,
    ],
    [
      "the workspace's disks",
      { memBytes: 1 * GiB, fsCapacityBytes: 10 * GiB, creates: true },
      wsUsed(1, 0, 95 * GiB),
      429,
      /^Storage quota exceeded/,
    ],
    [
      "memory exactly at the host's overcommitted room",
      { memBytes: 2 * GiB, fsCapacityBytes: 1 * GiB, creates: true },
      hostUsed(44 * GiB, 0),
      null,
    ],
    [
      "memory past the host's overcommitted room",
      { memBytes: 3 * GiB, fsCapacityBytes: 1 * GiB, creates: true },
      hostUsed(44 * GiB, 0),
      503,
      /^Unschedulable: this host's memory/,
    ],
    [
      "disk the existing sandboxes may still fill",
      { memBytes: 1 * GiB, fsCapacityBytes: 10 * GiB, creates: true },
      hostUsed(0, 75 * GiB),
      503,
      /^Unschedulable: this host's free disk/,
    ],
    [
      "a start is not refused for disk",
      { memBytes: 1 * GiB, fsCapacityBytes: 10 * GiB, creates: false },
      hostUsed(0, 80 * GiB),
      null,
    ],
  ];
  for (const [name, req, now, status, message] of cases) {
    const r = admit(req, host, now, limits);
    assert.equal(r?.status ?? null, status, name);
    if (message) assert.match(r!.message, message, name);
  }
});

test("admission: the quota messages carry the words LangSmith's SDK maps to a quota type", () => {
  // extractQuotaType: "sandbox" with "count" or "limit" first, then cpu, memory, storage.
  const type = (m: string) => {
    const l = m.toLowerCase();
    return l.includes("sandbox") && (l.includes("count") || l.includes("limit"))
      ? "sandbox_count"
      : l.includes("memory")
        ? "memory"
        : l.includes("storage")
          ? "storage"
          : null;
  };
  assert.equal(
    type(admit({ memBytes: GiB, fsCapacityBytes: GiB, creates: true }, host, wsUsed(3, 0, 0), limits)!.message),
    "sandbox_count",
  );
  assert.equal(
    type(
      admit({ memBytes: 2 * GiB, fsCapacityBytes: GiB, creates: true }, host, wsUsed(1, 15 * GiB, 0), limits)!.message,
    ),
    "memory",
  );
  assert.equal(
    type(
      admit({ memBytes: GiB, fsCapacityBytes: 10 * GiB, creates: true }, host, wsUsed(1, 0, 95 * GiB), limits)!.message,
    ),
    "storage",
  );
});
