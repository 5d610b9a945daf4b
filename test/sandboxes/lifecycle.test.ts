import assert from "node:assert/strict";
import { describe, test } from "node:test";
import WebSocket from "ws";
import { allFeatures } from "../../src/platform/features.ts";
import { createSandboxesFeature } from "../../src/sandboxes/feature.ts";
import { startPlatform } from "../../src/platform/start-platform.ts";
import { loadConfig } from "../../src/config/config.ts";
import { createLogger } from "../../src/log/logger.ts";
import { DIALECTS, storageSettings } from "../support/dialects.ts";
import { BASE_CACHE, startSandboxPlatform } from "./support.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";

async function waitFor<T>(fn: () => Promise<T | undefined | false>, ms = 10_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 50));
  }
}

for (const dialect of DIALECTS) {
  describe(`sandbox lifecycle (${dialect})`, () => {
    test("stop keeps files, start brings them back; PATCH proxy_config needs ready (400); rename conflict 409", async (t) => {
      const p = await startSandboxPlatform(t, { dialect });
      if (!p) return;
      const box = await p.create({ name: "keeper" });
      await p.create({ name: "other" });
      assert.equal((await p.exec(box, "echo kept > ~/note.txt && sleep 30 & true")).body.exit_code, 0);
      let res = await p.api("/v2/sandboxes/boxes/keeper/stop", { method: "POST" });
      assert.equal(res.status, 204);
      res = await p.api("/v2/sandboxes/boxes/keeper");
      const stopped = await res.json();
      assert.equal(stopped.status, "stopped");
      assert.ok(stopped.stopped_at);
      // A data-plane request wakes a stopped sandbox (LangSmith Deployment's clients rely on it).
      const woke = await p.exec(box, "cat ~/note.txt");
      assert.equal(woke.status, 200);
      assert.equal(woke.body.stdout, "kept\n");
      assert.equal((await (await p.api("/v2/sandboxes/boxes/keeper")).json()).status, "ready");
      assert.equal((await p.api("/v2/sandboxes/boxes/keeper/stop", { method: "POST" })).status, 204);
      res = await p.api("/v2/sandboxes/boxes/keeper", { method: "PATCH", json: { proxy_config: { rules: [] } } });
      assert.equal(res.status, 400);
      res = await p.api("/v2/sandboxes/boxes/keeper/start", { method: "POST" });
      assert.equal(res.status, 202);
      assert.equal((await res.json()).status, "ready");
      const r = await p.exec(box, "cat ~/note.txt; ps -eo args | grep -qx 'sleep 30' && echo running || echo no-sleep");
      assert.equal(r.body.stdout, "kept\nno-sleep\n");
      await p.api("/v2/secrets", { method: "PUT", json: [{ key: "TOKEN", value: "t" }] });
      const proxy_config = {
        rules: [
          {
            name: "r",
            match_hosts: ["api.example.com"],
            headers: [{ name: "Authorization", type: "workspace_secret", value: "Bearer {TOKEN}" }],
          },
        ],
      };
      res = await p.api("/v2/sandboxes/boxes/keeper", {
        method: "PATCH",
        json: { proxy_config, idle_ttl_seconds: 120 },
      });
      assert.equal(res.status, 200);
      assert.equal((await res.json()).idle_ttl_seconds, 120);
      res = await p.api("/v2/sandboxes/boxes/keeper", { method: "PATCH", json: { name: "other" } });
      assert.equal(res.status, 409);
      res = await p.api("/v2/sandboxes/boxes/keeper", { method: "PATCH", json: { name: "renamed" } });
      assert.equal((await res.json()).name, "renamed");
    });

    test("idle stop counts running commands, then delete_after_stop removes the sandbox", async (t) => {
      // One TTL "second" lasts 5 ms here: idle_ttl_seconds 60 = 300 ms.
      const p = await startSandboxPlatform(t, {
        dialect,
        env: { WHARF_SANDBOX_TTL_SECOND_MS: "5", WHARF_SANDBOX_TICK_MS: "50" },
      });
      if (!p) return;
      const box = await p.create({ name: "idle", idle_ttl_seconds: 60, delete_after_stop_seconds: 120 });
      // A background job keeps it busy although no API call is made. It outlives the 600 ms wait by
      // seconds: on a loaded machine that wait's timer fires late, and a job already gone let the
      // idle stop come first.
      await p.exec(box, "sleep 4 >/dev/null 2>&1 &");
      await new Promise((r) => setTimeout(r, 600));
      let res = await p.api("/v2/sandboxes/boxes/idle/status");
      const busy = await res.json();
      assert.equal(busy.status, "ready", JSON.stringify(busy));
      await waitFor(async () => {
        const s = await (await p.api("/v2/sandboxes/boxes/idle/status")).json();
        return s.status === "stopped" && s;
      });
      await waitFor(async () => (await p.api("/v2/sandboxes/boxes/idle/status")).status === 404);
      res = await p.api("/v2/sandboxes/boxes/idle");
      assert.equal(res.status, 404);
    });

    test("restart: a running sandbox is re-adopted; one whose processes died is marked stopped", async (t) => {
      if (!requireCapability(t, process.platform === "linux" && isRoot(), "sandboxes need root on Linux")) return;
      const s = await storageSettings(t, dialect);
      if (!s) return;
      const config = loadConfig({
        WHARF_HOME: s.home,
        WHARF_PORT: "0",
        ...(s.databaseUrl ? { DATABASE_URL: s.databaseUrl } : {}),
      });
      const log = createLogger({ level: "silent" });
      const env = { WHARF_SANDBOX_BASE_CACHE: BASE_CACHE, WHARF_SANDBOX_TICK_MS: "100" };
      const boot = (keepRunning: boolean) =>
        startPlatform(config, {
          log,
          pgSchema: s.pgSchema,
          features: allFeatures()
            .filter((f) => f.name !== "sandboxes")
            .concat(createSandboxesFeature({ ...env, WHARF_SANDBOX_KEEP_RUNNING: keepRunning ? "1" : "0" })),
        });
      let platform = await boot(true);
      const key = platform.bootstrap.apiKey!;
      t.after(async () => {
        await platform.stop();
        await s.dropSchema();
      });
      const call = (path: string, init: RequestInit = {}) =>
        fetch(platform.url + path, {
          ...init,
          headers: { "x-api-key": key, "content-type": "application/json", ...(init.headers ?? {}) },
        });
      let res = await call("/v2/sandboxes/boxes", { method: "POST", body: JSON.stringify({ name: "survivor" }) });
      const survivor = await res.json();
      res = await call("/v2/sandboxes/boxes", { method: "POST", body: JSON.stringify({ name: "victim" }) });
      const victim = await res.json();
      const victimRuntime = JSON.parse(
        (
          await platform.ctx.db
            .selectFrom("sandboxes")
            .select("runtime")
            .where("id", "=", victim.id)
            .executeTakeFirstOrThrow()
        ).runtime!,
      );
      await fetch(`${survivor.dataplane_url}/execute`, {
        method: "POST",
        headers: { "x-api-key": key },
        body: JSON.stringify({ command: "echo 1 > ~/x" }),
      });
      // A command running when the platform goes away: a reconnecting client later gets its output and why it ended.
      const running = new WebSocket(`${survivor.dataplane_url.replace(/^http/, "ws")}/execute/ws`, {
        headers: { "X-Api-Key": key },
      });
      const commandId = await new Promise<string>((resolve, reject) => {
        let id = "";
        running.on("open", () => running.send(JSON.stringify({ type: "execute", command: "echo before; sleep 60" })));
        running.on("message", (d) => {
          const m = JSON.parse(d.toString());
          if (m.type === "started") id = m.command_id;
          if (m.type === "stdout") resolve(id);
        });
        running.on("error", reject);
      });
      running.terminate();
      await platform.stop();
      // The host "lost" the victim's processes while the platform was down (the survivor kept running).
      const ref = victimRuntime;
      process.kill(ref.init.pid, "SIGKILL");
      process.kill(ref.holder.pid, "SIGKILL");
      platform = await boot(false);
      res = await call("/v2/sandboxes/boxes/victim");
      const v = await res.json();
      assert.equal(v.status, "stopped");
      assert.match(v.status_message, /processes were gone/);
      res = await call("/v2/sandboxes/boxes/survivor");
      assert.equal((await res.json()).status, "ready");
      res = await fetch(`${platform.url}/sandboxes/dp/${survivor.id}/execute`, {
        method: "POST",
        headers: { "x-api-key": key },
        body: JSON.stringify({ command: "cat ~/x" }),
      });
      assert.deepEqual(await res.json(), { stdout: "1\n", stderr: "", exit_code: 0 });
      const again = new WebSocket(`${platform.url.replace(/^http/, "ws")}/sandboxes/dp/${survivor.id}/execute/ws`, {
        headers: { "X-Api-Key": key },
      });
      const msgs: any[] = [];
      await new Promise<void>((resolve, reject) => {
        again.on("open", () =>
          again.send(JSON.stringify({ type: "reconnect", command_id: commandId, stdout_offset: 0, stderr_offset: 0 })),
        );
        again.on("message", (d) => msgs.push(JSON.parse(d.toString())));
        again.on("close", () => resolve());
        again.on("error", reject);
      });
      assert.equal(
        msgs
          .filter((m) => m.type === "stdout")
          .map((m) => m.data)
          .join(""),
        "before\n",
      );
      assert.equal(msgs.at(-1).type, "error");
      assert.match(msgs.at(-1).error, /restarted/);
      res = await fetch(`${platform.url}/sandboxes/dp/${survivor.id}/execute`, {
        method: "POST",
        headers: { "x-api-key": key },
        body: JSON.stringify({ command: "ps -eo args | grep -c '^sleep 60' || true" }),
      });
      assert.equal((await res.json()).stdout, "0\n", "the command was ended, not left running");
      // The egress listeners were opened anew in the re-adopted sandbox: its traffic still meets the proxy.
      res = await fetch(`${platform.url}/sandboxes/dp/${survivor.id}/execute`, {
        method: "POST",
        headers: { "x-api-key": key },
        body: JSON.stringify({
          command:
            "curl -s -o /dev/null --max-time 10 http://203.0.113.7/; echo $?; curl -s -o /dev/null --noproxy '*' --max-time 10 http://203.0.113.7/; echo $?",
        }),
      });
      const codes = (await res.json()).stdout.trim().split("\n");
      // curl exit 7 = could not connect: no listener. Anything else means the proxy took the connection.
      assert.ok(
        codes.length === 2 && codes.every((c: string) => c !== "7"),
        `the proxy's listeners answer after re-adoption (curl exits ${codes})`,
      );
    });

    test("a sandbox whose init dies is marked failed with a reason; delete works from any state", async (t) => {
      const p = await startSandboxPlatform(t, { dialect });
      if (!p) return;
      const box = await p.create({ name: "doomed" });
      const row = await p.ctx.db.selectFrom("sandboxes").selectAll().where("id", "=", box.id).executeTakeFirstOrThrow();
      const ref = JSON.parse(row.runtime!);
      process.kill(ref.init.pid, "SIGKILL");
      // A stale reference (dead or recycled pid) never runs anything anywhere.
      const stale = p
        .manager()
        .driver!.exec(
          box.id,
          { ...ref, init: { pid: process.pid, start: ref.init.start } },
          { argv: ["/bin/true"], env: {}, cwd: "/" },
        );
      stale.stdin.end();
      let staleErr = "";
      stale.stderr.on("data", (d: Buffer) => (staleErr += d));
      // The exit can be reported before the last of stderr is read: wait for both.
      const stderrEnded = new Promise((resolve) => stale.stderr.once("end", resolve).once("close", resolve));
      stale.stdout.resume();
      assert.equal(await stale.exited, 125);
      await stderrEnded;
      assert.match(staleErr, /not running|not a sandbox|cgroup/);
      const failed = await waitFor(async () => {
        const s = await (await p.api("/v2/sandboxes/boxes/doomed/status")).json();
        return s.status === "failed" && s;
      });
      assert.match(failed.status_message, /exited unexpectedly/);
      let res = await p.api("/v2/sandboxes/boxes/doomed/start", { method: "POST" });
      assert.equal((await res.json()).status, "ready");
      const pending = await p.create({ name: "pending", wait_for_ready: false });
      assert.equal(pending.status, "provisioning");
      res = await p.api("/v2/sandboxes/boxes/pending", { method: "DELETE" });
      assert.equal(res.status, 204);
      res = await p.api("/v2/sandboxes/boxes/doomed", { method: "DELETE" });
      assert.equal(res.status, 204);
      res = await p.api("/v2/sandboxes/boxes");
      assert.equal((await res.json()).sandboxes.length, 0);
    });
  });
}
