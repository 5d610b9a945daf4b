import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { DIALECTS } from "../support/dialects.ts";
import { startTestAgentServer } from "./support.ts";

for (const dialect of DIALECTS) {
  describe(`run slots (${dialect})`, () => {
    it("runs queued for a slot start as soon as one frees, not at the next housekeeping timer", async (t) => {
      // A 60 s lease: the housekeeping timer fires every 20 s, far beyond this test's runs.
      const server = await startTestAgentServer(t, { dialect, open: true, runSlots: 1, leaseMs: 60_000 });
      if (!server) return t.skip(`${dialect} unavailable`);
      const t0 = performance.now();
      const answers = await Promise.all(
        Array.from({ length: 6 }, (_, i) =>
          fetch(`${server.url}/runs/wait`, {
            method: "POST",
            headers: { "content-type": "application/json" },
            // Each run holds the slot 300 ms: the others are queued meanwhile.
            body: JSON.stringify({
              assistant_id: "slow",
              input: { messages: [{ role: "human", content: `m${i} sleep 300` }] },
            }),
          }).then(async (r) => ({ status: r.status, text: await r.text() })),
        ),
      );
      answers.forEach((a, i) => {
        assert.equal(a.status, 200);
        assert.match(a.text, new RegExp(`done: m${i} sleep 300`));
      });
      assert.ok(
        performance.now() - t0 < 15_000,
        `six 300 ms runs through one slot took ${Math.round(performance.now() - t0)} ms`,
      );
    });
  });
}
