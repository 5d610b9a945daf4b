import assert from "node:assert/strict";
import { test } from "node:test";
import { RunFollowers, type FollowersHost } from "../../src/agent-server/runs/run-followers.ts";
import type { ActiveRun } from "../../src/agent-server/runs/run-types.ts";

/** Followers over a run table whose read of the run's row first lets `during` happen. */
function followersReading(status: string | null, during: (f: RunFollowers) => void): RunFollowers {
  const read = async () => {
    during(followers);
    return status === null ? undefined : { status };
  };
  const chain = { select: () => chain, where: () => chain, executeTakeFirst: read };
  const host = {
    ctx: { db: { selectFrom: () => chain } },
    streams: { enabled: false },
    stopSignal: new AbortController().signal,
    isStopping: () => false,
    active: () => undefined,
    isActive: () => false,
    endedChannel: () => undefined,
  } as unknown as FollowersHost;
  const followers = new RunFollowers(host);
  return followers;
}

const run = { run: { run_id: "r1" } } as unknown as ActiveRun;

test("a queued run that starts and ends here while its row is read is still found by its waiter", async () => {
  // The row is gone by the time the read answers (the run ended), but its start was told meanwhile.
  const gone = followersReading(null, (f) => f.notifyStart("r1", run));
  assert.equal(await gone.whenStarted("r1"), run);
  // The read answers from before the start (still queued): the start told meanwhile is not lost.
  const stale = followersReading("pending", (f) => f.notifyStart("r1", run));
  assert.equal(await stale.whenStarted("r1"), run);
  // Cancelled before it started.
  const cancelled = followersReading("pending", (f) => f.notifyStart("r1", null));
  assert.equal(await cancelled.whenStarted("r1"), null);
  // Over, and not seen starting: nothing to wait for.
  assert.equal(await followersReading("success", () => {}).whenStarted("r1"), null);
});
