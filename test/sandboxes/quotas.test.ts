import assert from "node:assert/strict";
import os from "node:os";
import { describe, test } from "node:test";
import { startSandboxPlatform } from "./support.ts";

const MiB = 1024 ** 2;
const GiB = 1024 ** 3;

describe("sandbox admission and quotas", () => {
  test("a sandbox of 1 TiB disk and 64 GiB memory on a smaller host is refused with 422 and nothing is made", async (t) => {
    const p = await startSandboxPlatform(t, { env: { WHARF_SANDBOX_WARM_POOL: "0" } });
    if (!p) return;
    const res = await p.api("/v2/sandboxes/boxes", {
      method: "POST",
      json: { name: "huge", mem_bytes: 64 * GiB, fs_capacity_bytes: 1024 * GiB },
    });
    const body = await res.json();
    assert.equal(res.status, 422, JSON.stringify(body));
    assert.equal(body.detail[0].type, "value_error");
    // The host has less memory than that (this one: ~23 GiB); a host with more has less free disk.
    if (os.totalmem() < 64 * GiB) assert.deepEqual(body.detail[0].loc, ["body", "mem_bytes"]);
    assert.match(body.detail[0].msg, /(mem_bytes|fs_capacity_bytes) .* is more than this host/);
    const list = await (await p.api("/v2/sandboxes/boxes")).json();
    assert.deepEqual(list.sandboxes, []);
    // Growing a sandbox past the host later is refused the same way.
    await p.create({ name: "small", mem_bytes: 128 * MiB, fs_capacity_bytes: 64 * MiB, wait_for_ready: false });
    const patched = await p.api("/v2/sandboxes/boxes/small", { method: "PATCH", json: { mem_bytes: 64 * GiB } });
    if (os.totalmem() < 64 * GiB) assert.equal(patched.status, 422);
  });

  test("workspace quotas: sandbox count, running memory and disk end in 429 naming the quota", async (t) => {
    const p = await startSandboxPlatform(t, {
      env: {
        WHARF_SANDBOX_WARM_POOL: "0",
        WHARF_SANDBOX_WORKSPACE_MAX_SANDBOXES: "2",
        WHARF_SANDBOX_WORKSPACE_MAX_MEM_BYTES: String(512 * MiB),
        WHARF_SANDBOX_WORKSPACE_MAX_DISK_BYTES: String(256 * MiB),
      },
    });
    if (!p) return;
    const small = { mem_bytes: 128 * MiB, fs_capacity_bytes: 64 * MiB };
    await p.create({ name: "one", ...small });
    await p.create({ name: "two", ...small });
    let res = await p.api("/v2/sandboxes/boxes", { method: "POST", json: { name: "three", ...small } });
    let body = await res.json();
    assert.equal(res.status, 429, JSON.stringify(body));
    assert.equal(body.detail.error, "QuotaExceeded");
    assert.match(body.detail.message, /^Sandbox count quota reached: this workspace may have 2 sandboxes/);
    assert.equal((await p.api("/v2/sandboxes/boxes/two", { method: "DELETE" })).status, 204);

    res = await p.api("/v2/sandboxes/boxes", {
      method: "POST",
      json: { name: "greedy", mem_bytes: 512 * MiB, fs_capacity_bytes: 64 * MiB },
    });
    body = await res.json();
    assert.equal(res.status, 429, JSON.stringify(body));
    assert.match(body.detail.message, /^Memory quota exceeded/);

    res = await p.api("/v2/sandboxes/boxes", {
      method: "POST",
      json: { name: "wide", mem_bytes: 128 * MiB, fs_capacity_bytes: 256 * MiB },
    });
    body = await res.json();
    assert.equal(res.status, 429, JSON.stringify(body));
    assert.match(body.detail.message, /^Storage quota exceeded/);

    // Stopped sandboxes hold no memory: a bigger one fits once "one" is stopped, and "one" then cannot start.
    assert.equal((await p.api("/v2/sandboxes/boxes/one/stop", { method: "POST" })).status, 204);
    await p.create({ name: "big", mem_bytes: 448 * MiB, fs_capacity_bytes: 64 * MiB });
    res = await p.api("/v2/sandboxes/boxes/one/start", { method: "POST" });
    body = await res.json();
    assert.equal(res.status, 429, JSON.stringify(body));
    assert.match(body.detail.message, /^Memory quota exceeded/);
    assert.equal((await (await p.api("/v2/sandboxes/boxes/one")).json()).status, "stopped");
  });

  test("host capacity: running sandboxes' memory is committed; past it a create or start is 503 Unschedulable", async (t) => {
    // Room for 1.5 GiB of running sandboxes on this host, whatever its size.
    const factor = (1.5 * GiB) / os.totalmem();
    const p = await startSandboxPlatform(t, {
      env: { WHARF_SANDBOX_WARM_POOL: "0", WHARF_SANDBOX_MEMORY_OVERCOMMIT: factor.toFixed(4) },
    });
    if (!p) return;
    const box = { mem_bytes: GiB, fs_capacity_bytes: 64 * MiB };
    await p.create({ name: "first", ...box });
    // Concurrent creates cannot both take the last room.
    const tries = await Promise.all(
      ["a", "b", "c"].map((n) =>
        p.api("/v2/sandboxes/boxes", { method: "POST", json: { name: `second-${n}`, ...box } }),
      ),
    );
    assert.deepEqual(
      tries.map((r) => r.status),
      [503, 503, 503],
    );
    const body = await tries[0].json();
    assert.equal(body.detail.error, "Unschedulable");
    assert.match(body.detail.message, /this host's memory is committed to running sandboxes/);
    // A stopped sandbox gives its memory back; a data-plane wake of it is then refused the same way.
    assert.equal((await p.api("/v2/sandboxes/boxes/first/stop", { method: "POST" })).status, 204);
    const second = await p.create({ name: "second", ...box });
    const first = await (await p.api("/v2/sandboxes/boxes/first")).json();
    const woken = await p.exec(first, "true");
    assert.equal(woken.status, 503, JSON.stringify(woken.body));
    assert.equal((await (await p.api("/v2/sandboxes/boxes/first")).json()).status, "stopped");
    assert.equal((await p.exec(second, "echo fine")).body.stdout, "fine\n");
  });
});
