import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DIALECTS } from "../support/dialects.ts";
import { startSandboxPlatform } from "./support.ts";

for (const dialect of DIALECTS) {
  describe(`sandboxes API (${dialect})`, () => {
    test("create waits until exec works, exec through the data plane, list, get, delete", async (t) => {
      const p = await startSandboxPlatform(t, { dialect });
      if (!p) return;
      const box = await p.create({
        name: "demo",
        labels: { team: "a" },
        env_vars: { GREETING: "hello" },
        mem_bytes: 256 * 1024 * 1024,
      });
      assert.equal(box.status, "ready");
      assert.equal(box.name, "demo");
      assert.match(box.dataplane_url, /\/sandboxes\/dp\//);
      assert.equal(box.idle_ttl_seconds, 600);
      assert.equal(box.mem_bytes, 256 * 1024 * 1024);
      assert.equal("env_vars" in box, false);

      let r = await p.exec(box, 'python3 -c "print(1+1)"; echo "$GREETING $HOME $(id -u)"; echo err >&2; exit 3');
      assert.equal(r.status, 200);
      assert.deepEqual(r.body, { stdout: "2\nhello /home/user 1000\n", stderr: "err\n", exit_code: 3 });
      r = await p.exec(box, "pwd; echo $X", { cwd: "/tmp", env: { X: "y" } });
      assert.equal(r.body.stdout, "/tmp\ny\n");

      let res = await p.api("/v2/sandboxes/boxes", { method: "POST", json: { name: "demo" } });
      assert.equal(res.status, 409);

      res = await p.api("/api/v2/sandboxes/boxes?label=team=a");
      const list = await res.json();
      assert.equal(list.sandboxes.length, 1);
      assert.equal(list.offset, 1);
      res = await p.api("/v2/sandboxes/boxes?label=team=b");
      assert.equal((await res.json()).sandboxes.length, 0);

      res = await p.api(`/v2/sandboxes/boxes/${box.id}`);
      assert.equal((await res.json()).name, "demo");
      res = await p.api("/v2/sandboxes/boxes/demo/status");
      assert.deepEqual(await res.json(), { status: "ready", status_message: null });

      res = await p.api("/v2/sandboxes/boxes/demo", { method: "DELETE" });
      assert.equal(res.status, 204);
      res = await p.api("/v2/sandboxes/boxes/demo");
      assert.equal(res.status, 404);
      r = await p.exec(box, "true");
      assert.equal(r.status, 404);
    });

    test("validation: 422 with FastAPI locs", async (t) => {
      const p = await startSandboxPlatform(t, { dialect });
      if (!p) return;
      let res = await p.api("/v2/sandboxes/boxes", {
        method: "POST",
        json: { idle_ttl_seconds: 61, name: "Bad Name" },
      });
      assert.equal(res.status, 422);
      const locs = (await res.json()).detail.map((d: { loc: unknown[] }) => d.loc.join("."));
      assert.ok(locs.includes("body.idle_ttl_seconds"));
      assert.ok(locs.includes("body.name"));
      res = await p.api("/v2/sandboxes/boxes", {
        method: "POST",
        json: { snapshot_id: "nope", wait_for_ready: false },
      });
      assert.equal(res.status, 422);
    });
  });
}
