import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { Launcher } from "../../src/confinement/launcher.ts";
import { DeploymentsLayout } from "../../src/deployments/layout.ts";
import { RevisionRuntime } from "../../src/deployments/runtime/revision-runtime.ts";
import type { PlatformContext } from "../../src/platform/context.ts";
import { fakeRunner } from "./support.ts";

/**
 * DELETE answers after `purge`: work of the deployment still in flight (a server start the
 * serving supervisor began while the old server was being stopped, a build step) ends first, and
 * only then the state folder goes, so a start racing the deletion cannot leave it behind; nothing
 * of the deployment starts afterwards.
 */
describe("purging a deleted deployment", () => {
  test("waits for work in flight, then removes the state folder; later starts are refused", async (t) => {
    const home = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-purge-"));
    t.after(() => fs.rmSync(home, { recursive: true, force: true }));
    const layout = new DeploymentsLayout(home);
    const ctx = { db: null, log: { warn() {}, info() {}, error() {} } } as unknown as PlatformContext;
    const runtime = new RevisionRuntime(
      ctx,
      layout,
      new Launcher({ isolation: false, scratchRoot: layout.scratch, baseCacheDir: home }),
      fakeRunner,
    );
    const track = (runtime as unknown as { track<T>(id: string, work: () => Promise<T>): Promise<T> }).track.bind(
      runtime,
    );
    const state = layout.stateDir("d1");
    // A start in flight that (re)creates the state folder after the deletion began.
    let release!: () => void;
    const start = track("d1", async () => {
      await new Promise<void>((r) => (release = r));
      fs.mkdirSync(state, { recursive: true });
    });
    const purged = runtime.purge("d1");
    await new Promise((r) => setTimeout(r, 50));
    release();
    await purged;
    await start;
    assert.ok(!fs.existsSync(state), "the folder the racing start made is gone when purge returns");
    await assert.rejects(
      track("d1", async () => fs.mkdirSync(state, { recursive: true })),
      /being deleted/,
    );
    assert.ok(!fs.existsSync(state));
    // Other deployments are unaffected.
    assert.equal(await track("d2", async () => "ok"), "ok");
  });
});
