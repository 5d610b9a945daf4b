import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { TSX_LOADER } from "../../src/deployments/build/builder.ts";
import { cgroupLayout } from "../../src/confinement/cgroups.ts";
import { DIALECTS, storageSettings } from "../support/dialects.ts";
import { freePort } from "../support/process.ts";
import { TEST_LOCAL_ROOTS } from "../support/platform.ts";
import { copyProject, FIXTURES, lastMessage, processesWithArg, runWait } from "./support.ts";

const TERMINAL = new Set(["DEPLOYED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED"]);

function startChild(env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ["--import", TSX_LOADER, path.join(FIXTURES, "platform-child.ts")], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  return new Promise((resolve, reject) => {
    const onData = (d: Buffer) => {
      out += d;
      const m = /READY (\S+)/.exec(out);
      if (m) resolve({ child, url: m[1] });
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (d) => (out += d));
    child.once("exit", (code) => reject(new Error(`platform exited with ${code}: ${out}`)));
  });
}

function commOf(pid: number): string {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
}

/** Stops a platform child unless it has already exited (a test that failed right after its SIGKILL). */
async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((r) => child.once("exit", r).once("error", r));
  child.kill("SIGTERM");
  await exited;
}

for (const dialect of DIALECTS) {
  describe(`deployments survive a SIGKILL of the platform (${dialect})`, () => {
    test("mid-build and mid-deploy: after a restart nothing stays transitional and the DEPLOYED revision serves again", async (t) => {
      const s = await storageSettings(t, dialect);
      if (!s) return;
      const port = await freePort();
      const env: Record<string, string> = {
        WHARF_HOME: s.home,
        WHARF_PORT: String(port),
        ...(s.databaseUrl ? { DATABASE_URL: s.databaseUrl } : {}),
        TEST_PG_SCHEMA: s.pgSchema ?? "",
        WHARF_DEPLOY_LOCAL_ROOTS: TEST_LOCAL_ROOTS,
      };
      let current = await startChild(env);
      t.after(async () => {
        await stopChild(current.child);
        await s.dropSchema();
      });
      const apiKey = fs.readFileSync(path.join(s.home, "bootstrap-key"), "utf8").trim();
      const api = async (p: string, init: { method?: string; json?: unknown } = {}) => {
        const res = await fetch(current.url + p, {
          method: init.method ?? "GET",
          headers: { "x-api-key": apiKey, "content-type": "application/json" },
          body: init.json === undefined ? undefined : JSON.stringify(init.json),
        });
        return { status: res.status, body: await res.json().catch(() => null) };
      };
      const status = async (d: string, r: string) =>
        (await api(`/v2/deployments/${d}/revisions/${r}`)).body.status as string;
      const until = async (d: string, r: string, ok: (s: string) => boolean, ms: number) => {
        const deadline = Date.now() + ms;
        for (;;) {
          const st = await status(d, r);
          if (ok(st)) return st;
          if (Date.now() > deadline) throw new Error(`revision ${r} still ${st}`);
          await new Promise((res) => setTimeout(res, 100));
        }
      };
      const create = async (name: string, secrets: Array<{ name: string; value: string }>) => {
        const res = await api("/v2/deployments", {
          method: "POST",
          json: {
            name,
            source: "internal_source",
            source_config: {},
            source_revision_config: { langgraph_config_path: "langgraph.json", local_path: copyProject(t, "echo") },
            secrets,
          },
        });
        assert.equal(res.status, 201, JSON.stringify(res.body));
        return res.body as { id: string; latest_revision_id: string; source_config: { custom_url: string } };
      };

      const one = await create("one", [{ name: "REPLY_PREFIX", value: "one" }]);
      assert.equal(await until(one.id, one.latest_revision_id, (x) => TERMINAL.has(x), 60_000), "DEPLOYED");
      assert.equal(processesWithArg(one.id).length > 0, true, "the agent server runs");
      // Mid-build: a slow import makes the build's load check take seconds, long enough that the
      // other deployment's build (its own load check, slower on a loaded host) and start come first.
      const patched = await api(`/v2/deployments/${one.id}`, {
        method: "PATCH",
        json: {
          source_revision_config: { local_path: copyProject(t, "echo") },
          secrets: [
            { name: "REPLY_PREFIX", value: "one" },
            { name: "SLOW_IMPORT_MS", value: "8000" },
          ],
        },
      });
      const building = patched.body.latest_revision_id as string;
      // Mid-deploy: a fixture server that takes seconds to listen.
      const two = await create("two", [{ name: "FAKE_START_DELAY_MS", value: "2000" }]);
      await until(one.id, building, (x) => x === "BUILDING", 30_000);
      await until(two.id, two.latest_revision_id, (x) => x === "DEPLOYING", 30_000);
      // Its server is starting (it waits 2 s before it listens). The milliseconds while bubblewrap
      // sets its sandbox up (its init arms the parent-death signal only after that) are covered by
      // the watchdog, checked below with a process moved into a cgroup.
      const serving = Date.now() + 10_000;
      while (!processesWithArg(two.id).some((pid) => commOf(pid) === "node") && Date.now() < serving)
        await new Promise((r) => setTimeout(r, 20));
      await new Promise((r) => setTimeout(r, 300));
      // Whatever is in a server's cgroup goes with the platform, not only what bubblewrap started
      // (that also dies with its parent): the confinement's watchdog empties the cgroup. A process
      // of the host's own, moved in, stands for what bubblewrap had not made mortal yet.
      const procs = cgroupLayout().procsFiles(`dep-${one.latest_revision_id}`);
      const stray = procs.every((f) => fs.existsSync(f))
        ? spawn("sleep", ["600"], { stdio: "ignore", detached: true })
        : null;
      t.after(() => void stray?.kill("SIGKILL"));
      const strayGone = stray && new Promise((r) => stray.once("exit", (_code, signal) => r(signal)));
      for (const f of stray ? procs : []) fs.appendFileSync(f, `${stray!.pid}\n`);
      assert.equal(await status(one.id, building), "BUILDING", "the patched revision is still building at the kill");
      current.child.kill("SIGKILL");
      await new Promise((r) => current.child.once("exit", r));
      if (strayGone)
        assert.equal(
          await Promise.race([strayGone, new Promise((r) => setTimeout(() => r("still running after 5 s"), 5000))]),
          "SIGKILL",
          "the watchdog empties the cgroup",
        );
      // Confined servers and build steps die with the platform process: no orphans.
      const gone = Date.now() + 5000;
      while ((processesWithArg(one.id).length || processesWithArg(two.id).length) && Date.now() < gone)
        await new Promise((r) => setTimeout(r, 50));
      const orphans = [...processesWithArg(one.id), ...processesWithArg(two.id)];
      assert.deepEqual(
        orphans,
        [],
        `no orphaned agent server after SIGKILL: ${orphans.map(describeProcess).join(" | ")}`,
      );

      current = await startChild(env);
      // The DEPLOYED revision serves again, from a fresh process; the orphan is gone.
      const deadline = Date.now() + 30_000;
      let run = await runWait(one.source_config.custom_url, apiKey, "back").catch(() => ({ status: 0, body: {} }));
      while (run.status !== 200 && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 200));
        run = await runWait(one.source_config.custom_url, apiKey, "back").catch(() => ({ status: 0, body: {} }));
      }
      assert.equal(run.status, 200, JSON.stringify(run.body));
      assert.equal(lastMessage(run.body), "one: back");
      // Both interrupted revisions end in a terminal state (resumed here: DEPLOYED).
      assert.equal(await until(one.id, building, (x) => TERMINAL.has(x), 60_000), "DEPLOYED");
      assert.equal(await until(two.id, two.latest_revision_id, (x) => TERMINAL.has(x), 60_000), "DEPLOYED");
      const steps = (await api(`/v2/deployments/${two.id}/revisions/${two.latest_revision_id}/transitions`)).body.map(
        (x: { to_status: string }) => x.to_status,
      );
      assert.deepEqual(steps.slice(-3), ["AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"]);
      assert.ok(steps.filter((x: string) => x === "DEPLOYING").length === 2, steps.join(","));
      const logs = (await api(`/v2/deployments/${one.id}/revisions/${building}/build_logs`)).body.logs
        .map((l: { message: string }) => l.message)
        .join("\n");
      assert.match(logs, /stopped during BUILDING; resuming \(attempt 2\)/);
      const live = await (
        await fetch(`${one.source_config.custom_url}/info`, { headers: { "x-api-key": apiKey } })
      ).json();
      assert.equal(live.revision, building);
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`a run in flight when the platform dies (${dialect})`, () => {
    test("the revision's server comes back --exclusive and settles it at start, not when its lease expires (20-30 s)", async (t) => {
      const s = await storageSettings(t, dialect);
      if (!s) return;
      const port = await freePort();
      const env: Record<string, string> = {
        WHARF_HOME: s.home,
        WHARF_PORT: String(port),
        ...(s.databaseUrl ? { DATABASE_URL: s.databaseUrl } : {}),
        TEST_PG_SCHEMA: s.pgSchema ?? "",
        WHARF_DEPLOY_LOCAL_ROOTS: TEST_LOCAL_ROOTS,
        TEST_REAL_RUNNER: "1",
      };
      let current = await startChild(env);
      t.after(async () => {
        await stopChild(current.child);
        await s.dropSchema();
      });
      const apiKey = fs.readFileSync(path.join(s.home, "bootstrap-key"), "utf8").trim();
      const headers = { "x-api-key": apiKey, "content-type": "application/json" };
      const call = async (url: string, init: { method?: string; json?: unknown } = {}) => {
        const res = await fetch(url, {
          method: init.method ?? "GET",
          headers,
          body: init.json === undefined ? undefined : JSON.stringify(init.json),
        });
        return { status: res.status, body: await res.json().catch(() => null) };
      };
      const created = await call(`${current.url}/v2/deployments`, {
        method: "POST",
        json: {
          name: "resumable",
          source: "internal_source",
          source_config: {},
          source_revision_config: { langgraph_config_path: "langgraph.json", local_path: copyProject(t, "resumable") },
          secrets: [],
        },
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const d = created.body as { id: string; latest_revision_id: string; source_config: { custom_url: string } };
      const url = d.source_config.custom_url;
      const deployDeadline = Date.now() + 90_000;
      for (;;) {
        const st = (await call(`${current.url}/v2/deployments/${d.id}/revisions/${d.latest_revision_id}`)).body
          .status as string;
        if (st === "DEPLOYED") break;
        if (TERMINAL.has(st) || Date.now() > deployDeadline) assert.fail(`revision ended ${st}`);
        await new Promise((r) => setTimeout(r, 100));
      }
      // A background run on a thread, in its slow first attempt.
      const thread = (await call(`${url}/threads`, { method: "POST", json: {} })).body as { thread_id: string };
      const started = await call(`${url}/threads/${thread.thread_id}/runs`, {
        method: "POST",
        json: { assistant_id: "slow", input: { messages: [{ role: "human", content: "survive" }] } },
      });
      assert.equal(started.status, 200, JSON.stringify(started.body));
      const runUrl = `${url}/threads/${thread.thread_id}/runs/${(started.body as { run_id: string }).run_id}`;
      const runStatus = async () =>
        ((await call(runUrl).catch(() => ({ status: 0, body: null }))).body as { status?: string } | null)?.status ??
        "unreachable";
      const runningBy = Date.now() + 20_000;
      while ((await runStatus()) !== "running") {
        assert.ok(Date.now() < runningBy, "the run did not start");
        await new Promise((r) => setTimeout(r, 100));
      }

      current.child.kill("SIGKILL");
      await new Promise((r) => current.child.once("exit", r));
      const killedAt = Date.now();
      current = await startChild(env);
      // Settled at the server's start (resumed: attempt 2 answers at once) instead of 20-30 s later.
      let status = await runStatus();
      while (status !== "success" && Date.now() - killedAt < 40_000) {
        await new Promise((r) => setTimeout(r, 200));
        status = await runStatus();
      }
      const settledMs = Date.now() - killedAt;
      assert.equal(status, "success");
      assert.ok(
        settledMs < 20_000,
        `the run settled ${settledMs} ms after the kill: later than a lease expiry would have`,
      );
      const state = (await call(`${url}/threads/${thread.thread_id}/state`)).body as {
        values: { messages: Array<{ content: string }> };
      };
      assert.equal(state.values.messages.at(-1)?.content, "attempt 2: survive");
      const logs = (
        await call(`${current.url}/v2/deployments/${d.id}/revisions/${d.latest_revision_id}/deploy_logs?limit=1000`)
      ).body.logs
        .map((l: { message: string }) => l.message)
        .join("\n");
      assert.match(logs, /serving again after a platform restart/);
      assert.match(logs, /the deployment's only server/);
    });
  });
}

/** What a leftover process is (for the failure message): its command line, parent and cgroup. */
function describeProcess(pid: number): string {
  const read = (f: string) => {
    try {
      return fs.readFileSync(`/proc/${pid}/${f}`, "utf8");
    } catch {
      return "?";
    }
  };
  const ppid = /PPid:\s*(\d+)/.exec(read("status"))?.[1];
  const pidsCgroup = /:pids:(\S+)/.exec(read("cgroup"))?.[1];
  let members = "";
  try {
    if (pidsCgroup)
      members = fs
        .readFileSync(`/sys/fs/cgroup/pids${pidsCgroup}/cgroup.procs`, "utf8")
        .trim()
        .split("\n")
        .map((m) => `${m}:${fs.readFileSync(`/proc/${m}/cmdline`, "utf8").split("\0").slice(0, 3).join(" ")}`)
        .join(", ");
  } catch (err) {
    members = String(err);
  }
  return `${pid} (parent ${ppid}, cgroup ${read("cgroup").replace(/\n/g, " ")}, members ${members}): ${read("cmdline").split("\0").join(" ").slice(0, 200)}`;
}
