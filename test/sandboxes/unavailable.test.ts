import assert from "node:assert/strict";
import { test } from "node:test";
import { allFeatures } from "../../src/platform/features.ts";
import { createSandboxesFeature } from "../../src/sandboxes/feature.ts";
import { startTestPlatform } from "../support/platform.ts";

test("without a driver, creating a sandbox is a 503 that says why, and nothing is stored", async (t) => {
  const features = allFeatures()
    .filter((f) => f.name !== "sandboxes")
    .concat(createSandboxesFeature({ WHARF_SANDBOX_DRIVER: "none" }));
  const p = await startTestPlatform(t, { features });
  if (!p) return;
  const res = await p.api("/v2/sandboxes/boxes", { method: "POST", json: { name: "x" } });
  assert.equal(res.status, 503);
  assert.match((await res.json()).detail, /disabled/);
  const list = await (await p.api("/v2/sandboxes/boxes")).json();
  assert.deepEqual(list, { sandboxes: [], offset: 0 });
});
