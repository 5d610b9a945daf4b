import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { DIALECTS, storageSettings } from "../support/dialects.ts";
import { freePort, runWharf, waitForOk, type WharfProcess } from "../support/process.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { BASE_CACHE } from "../sandboxes/support.ts";
import { TEST_LOCAL_ROOTS } from "../support/platform.ts";

const SLOW_PROJECT = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/slow-echo");
const RUNS = 100;
const SANDBOXES = 3;
const TERMINAL_REVISION = new Set([
  "DEPLOYED",
  "CREATE_FAILED",
  "BUILD_FAILED",
  "DEPLOY_FAILED",
  "SKIPPED",
  "INTERRUPTED",
]);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function pgUrlWithSchema(url: string, schema: string): string {
  const u = new URL(url);
  u.searchParams.set("options", `-c search_path=${schema}`);
  return u.toString();
}

/** Polls `probe` until it returns a value, or fails naming what it last saw. */
async function until<T>(
  what: string,
  ms: number,
  probe: () => Promise<T | null>,
  last: () => string = () => "",
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await probe().catch(() => null);
    if (v !== null) return v;
    if (Date.now() > deadline) throw new Error(`${what} within ${ms} ms; last seen: ${last()}`);
    await sleep(200);
  }
}

for (const dialect of DIALECTS) {
  describe(`one crash story: kill -9 of wharf up (${dialect})`, () => {
    test("during runs, sandbox commands, a rollout and secret writes: fast /ok, nothing acknowledged lost, nothing left half-done", async (t) => {
      if (
        !requireCapability(
          t,
          process.platform === "linux" && isRoot(),
          "the crash story needs root on Linux (sandboxes and confined deployments)",
        )
      )
        return;
      const s = await storageSettings(t, dialect);
      if (!s) return;
      const port = await freePort();
      const base = `http://127.0.0.1:${port}`;
      const env: Record<string, string> = {
        WHARF_HOME: s.home,
        WHARF_PORT: String(port),
        WHARF_EXAMPLE_PROJECT: "off",
        WHARF_DEPLOY_LOCAL_ROOTS: TEST_LOCAL_ROOTS,
        WHARF_SANDBOX_BASE_CACHE: BASE_CACHE,
        WHARF_LOG_LEVEL: "info",
      };
      if (s.databaseUrl) {
        env.DATABASE_URL = pgUrlWithSchema(s.databaseUrl, s.pgSchema!);
        const pg = (await import("pg")).default;
        const c = new pg.Client({ connectionString: s.databaseUrl });
        await c.connect();
        await c.query(`CREATE SCHEMA IF NOT EXISTS "${s.pgSchema}"`);
        await c.end();
      }
      const procs: WharfProcess[] = [];
      const start = () => {
        const p = runWharf(["up"], { env });
        procs.push(p);
        return p;
      };
      t.after(async () => {
        const live = procs.at(-1)!;
        if (live.child.exitCode === null) {
          live.child.kill("SIGTERM");
          await Promise.race([live.exited, sleep(20_000)]);
        }
        for (const p of procs) p.child.kill("SIGKILL");
        await s.dropSchema();
      });

      const phase = (() => {
        let last = performance.now();
        return (what: string) => {
          const now = performance.now();
          t.diagnostic(`${what}: ${Math.round(now - last)} ms`);
          last = now;
        };
      })();
      const first = start();
      await waitForOk(`${base}/ok`, 60_000).catch((err) => assert.fail(`${err.message}\n${first.output()}`));
      const key = fs.readFileSync(path.join(s.home, "bootstrap-key"), "utf8").trim();
      const api = async (p: string, init: { method?: string; json?: unknown; url?: string } = {}) => {
        const res = await fetch((init.url ?? base) + p, {
          method: init.method ?? "GET",
          headers: { "x-api-key": key, "content-type": "application/json" },
          body: init.json === undefined ? undefined : JSON.stringify(init.json),
        });
        const text = await res.text();
        return { status: res.status, body: text ? JSON.parse(text) : null };
      };
      const revisionStatus = async (d: string, r: string) =>
        (await api(`/v2/deployments/${d}/revisions/${r}`)).body?.status as string | undefined;

      // A deployed agent whose runs take 1.5 s.
      const created = await api("/v2/deployments", {
        method: "POST",
        json: {
          name: "crash",
          source: "internal_source",
          source_config: {},
          source_revision_config: { langgraph_config_path: "langgraph.json", local_path: SLOW_PROJECT },
        },
      });
      assert.equal(created.status, 201, JSON.stringify(created.body));
      const deployment = created.body.id as string;
      const agent = created.body.source_config.custom_url as string;
      let seen = "";
      assert.equal(
        await until(
          "the first revision ends",
          120_000,
          async () =>
            (seen = (await revisionStatus(deployment, created.body.latest_revision_id)) ?? "") &&
            TERMINAL_REVISION.has(seen)
              ? seen
              : null,
          () => seen,
        ),
        "DEPLOYED",
      );

      phase("first start and deployment");
      // Sandboxes with a command running.
      const boxes: Array<Record<string, any>> = [];
      for (let i = 0; i < SANDBOXES; i++) {
        const r = await api("/v2/sandboxes/boxes", {
          method: "POST",
          json: { name: `crash-${i}`, wait_for_ready: true },
        });
        assert.equal(r.status, 201, JSON.stringify(r.body));
        boxes.push(r.body);
      }
      for (const b of boxes)
        void fetch(`${b.dataplane_url}/execute`, {
          method: "POST",
          headers: { "x-api-key": key, "content-type": "application/json" },
          body: JSON.stringify({ command: "sleep 120", timeout: 300 }),
        }).catch(() => null);

      phase("sandboxes");
      // Runs in flight, a rollout under way, secret writes: then kill -9.
      const threads = await Promise.all(
        Array.from(
          { length: RUNS },
          async () => (await api("/threads", { method: "POST", json: {}, url: agent })).body.thread_id as string,
        ),
      );
      const acknowledgedRuns: Array<{ thread: string; run: string }> = [];
      const runs = threads.map(async (thread, i) => {
        const r = await api(`/threads/${thread}/runs`, {
          method: "POST",
          url: agent,
          json: { assistant_id: "slow", input: { messages: [{ role: "human", content: `m${i}` }] } },
        }).catch(() => null);
        if (r?.status === 200) acknowledgedRuns.push({ thread, run: r.body.run_id });
      });
      await Promise.all(runs);
      const patched = await api(`/v2/deployments/${deployment}`, {
        method: "PATCH",
        json: { secrets: [{ name: "GENERATION", value: "2" }] },
      });
      assert.equal(patched.status, 200, JSON.stringify(patched.body));
      const rollout = patched.body.latest_revision_id as string;
      const acknowledgedSecrets: string[] = [];
      let killed = false;
      const writers = Array.from({ length: 4 }, async (_, w) => {
        for (let i = 0; !killed || i < 2; i++) {
          const k = `CRASH_${w}_${i}`;
          const res = await fetch(`${base}/v2/secrets`, {
            method: "PUT",
            headers: { "X-Api-Key": key, "content-type": "application/json" },
            body: JSON.stringify([{ key: k, value: "v" }]),
          }).catch(() => null);
          if (res?.status === 200) acknowledgedSecrets.push(k);
          if (killed) break;
        }
      });
      await sleep(300);
      first.child.kill("SIGKILL");
      killed = true;
      await first.exited;
      await Promise.all(writers);
      assert.ok(acknowledgedRuns.length >= RUNS * 0.9, `only ${acknowledgedRuns.length} runs acknowledged`);
      assert.ok(acknowledgedSecrets.length > 0);

      phase("load and kill");
      // Restart: /ok at once, recovery in the background.
      const began = performance.now();
      const second = start();
      const okMs = await waitForOk(`${base}/ok`, 60_000).catch((err) =>
        assert.fail(`${err.message}\n${second.output()}`),
      );
      const apiMs = performance.now() - began;
      t.diagnostic(`restart → /ok ${Math.round(okMs)} ms, → API serving ${Math.round(apiMs)} ms`);
      // Recovery runs behind /ok: a bound well under the 60 s wait, with room for a loaded CI machine.
      assert.ok(okMs < 10_000, `/ok answered ${Math.round(okMs)} ms after the restart`);

      // No acknowledged write is lost.
      const listed = (await api("/v2/secrets")).body as Array<{ key: string }>;
      const present = new Set(listed.map((x) => x.key));
      assert.deepEqual(
        acknowledgedSecrets.filter((k) => !present.has(k)),
        [],
        "acknowledged secrets are all there",
      );

      // The rollout resumes and ends DEPLOYED; the agent serves.
      const rolloutEnd = await until(
        "the interrupted rollout ends",
        120_000,
        async () =>
          (seen = (await revisionStatus(deployment, rollout)) ?? "") && TERMINAL_REVISION.has(seen) ? seen : null,
        () => seen,
      );
      // Both revisions' deploy logs, one line per entry: which server started (exclusive or not) when,
      // and how the failing one ended (a stack's first lines say where).
      const deployLog = async (revision: string) => {
        const body = (await api(`/v2/deployments/${deployment}/revisions/${revision}/deploy_logs?limit=100`)).body as {
          logs?: Array<{ timestamp: string; message: string }>;
        } | null;
        const lines = (body?.logs ?? [])
          .map((e) => `  ${e.timestamp.slice(11, 23)} ${e.message.slice(0, 200)}`)
          .filter((l) => !/^\S+\s+at /.test(l.trim()));
        return lines.join("\n").slice(-4000);
      };
      const logs = async () =>
        `\nthe rollout's deploy log:\n${await deployLog(rollout)}\nthe revision it replaces:\n${await deployLog(created.body.latest_revision_id)}`;
      assert.equal(rolloutEnd, "DEPLOYED", rolloutEnd === "DEPLOYED" ? "" : await logs());

      phase("restart, secrets, rollout");
      // No run stays pending or running: each finished, or ended in error.
      const settled = new Map<string, string>();
      await until(
        "every run settles",
        60_000,
        async () => {
          for (const { thread, run } of acknowledgedRuns) {
            if (settled.has(run)) continue;
            const r = await api(`/threads/${thread}/runs/${run}`, { url: agent });
            if (r.status === 200 && !["pending", "running"].includes(r.body.status)) settled.set(run, r.body.status);
          }
          return settled.size === acknowledgedRuns.length ? true : null;
        },
        () => `${settled.size}/${acknowledgedRuns.length} settled`,
      );
      const statuses = [...settled.values()];
      for (const st of statuses) assert.ok(["success", "error", "interrupted"].includes(st), `run ended ${st}`);
      t.diagnostic(
        `runs: ${statuses.filter((x) => x === "success").length} success, ${statuses.filter((x) => x !== "success").length} error/interrupted`,
      );

      phase("runs settled");
      // Every sandbox is re-adopted (and runs a command) or stopped/failed with a reason.
      for (const b of boxes) {
        const r = await until(`sandbox ${b.name} leaves provisioning`, 30_000, async () => {
          const x = await api(`/v2/sandboxes/boxes/${b.name}`);
          return x.status === 200 && x.body.status !== "provisioning" ? x.body : null;
        });
        if (r.status === "ready") {
          const ran = await fetch(`${r.dataplane_url}/execute`, {
            method: "POST",
            headers: { "x-api-key": key, "content-type": "application/json" },
            body: JSON.stringify({ command: "echo alive" }),
          });
          assert.equal(ran.status, 200, `re-adopted sandbox ${b.name} runs a command`);
          assert.equal((await ran.json()).stdout.trim(), "alive");
        } else {
          assert.ok(["stopped", "failed"].includes(r.status), `sandbox ${b.name} is ${r.status}`);
          assert.ok(r.status_message, `sandbox ${b.name} says why it is ${r.status}`);
        }
      }
      phase("sandboxes checked");
    });
  });
}
