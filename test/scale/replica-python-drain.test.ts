import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { test } from "node:test";
import { startAgentServer } from "../../src/agent-server/index.ts";
import { createLogger } from "../../src/log/logger.ts";
import { tempHome } from "../support/dialects.ts";
import { pythonAvailable, requireCapability, TEST_PYTHON_ENVS } from "../support/requirements.ts";
import { clusterAvailable, createStepsRun, followRun, startCluster, waitForStatus, type SseEvent } from "./cluster.ts";

const PY_PROJECT = path.join(path.dirname(fileURLToPath(import.meta.url)), "fixtures/py-steps");
// Long enough that a takeover after the lease (no drain) is told apart from a hand-back.
const LEASE_MS = 8000;
const STEPS = 12;

const attemptOf = (e: SseEvent) =>
  e.event === "metadata" ? (JSON.parse(e.data) as { attempt: number }).attempt : null;

test("SIGTERM on a replica running a Python graph: drained at a superstep (langgraph's RunControl) and resumed elsewhere without waiting for the lease", async (t) => {
  if (!(await clusterAvailable(t))) return;
  if (!requireCapability(t, await pythonAvailable(), "Python 3.11+ with venv is needed for Python graphs")) return;
  // The project's environment is made once, here (a replica must answer /ok within a minute).
  process.env.WHARF_PYTHON_ENVS = TEST_PYTHON_ENVS;
  const home = tempHome();
  t.after(() => fs.rmSync(home, { recursive: true, force: true }));
  const warm = await startAgentServer({
    projectDir: PY_PROJECT,
    host: "127.0.0.1",
    port: 0,
    databaseUrl: null,
    home,
    open: true,
    log: createLogger({ level: "silent" }),
  });
  await warm.stop();

  const cluster = await startCluster(
    t,
    3,
    { WHARF_RUN_LEASE_MS: String(LEASE_MS), WHARF_PYTHON_ENVS: TEST_PYTHON_ENVS },
    { project: PY_PROJECT },
  );
  const { threadId, runId } = await createStepsRun(cluster.lb.url, { steps: STEPS, delay: 250 });
  await waitForStatus(cluster.lb.url, threadId, runId, ["running"], 20_000);
  const exec = await cluster.executing(runId);
  assert.ok(exec, "executing replica found");
  const via = cluster.replicas.find((r) => r !== exec)!;

  const seen: Array<SseEvent & { at: number }> = [];
  let termAt = 0;
  await followRun(via.url, threadId, runId, "-1", (e) => {
    seen.push({ ...e, at: performance.now() });
    if (e.event === "values" && !termAt && seen.filter((x) => x.event === "values").length === 3) {
      termAt = performance.now();
      void exec.signal("SIGTERM");
    }
  });
  const second = seen.find((e) => attemptOf(e) === 2);
  assert.ok(second, `attempt 2 streamed: ${seen.map((e) => e.event).join(",")}`);
  assert.ok(
    !seen.some((e) => e.event === "error"),
    seen
      .filter((e) => e.event === "error")
      .map((e) => e.data)
      .join(" "),
  );
  const resumeMs = second.at - termAt;
  t.diagnostic(`SIGTERM → attempt 2's first event: ${resumeMs.toFixed(0)} ms (lease ${LEASE_MS} ms)`);
  assert.ok(resumeMs < LEASE_MS / 2, "handed back at once, not at lease expiry");
  assert.deepEqual(
    seen.map((e) => Number(e.id)),
    seen.map((_, i) => i),
    "ids contiguous across the attempts",
  );
  assert.equal(await waitForStatus(cluster.lb.url, threadId, runId, ["success", "error"], 20_000), "success");
  const state = (await (await fetch(`${cluster.lb.url}/threads/${threadId}/state`)).json()) as {
    values: { done: number[] };
  };
  assert.deepEqual(
    state.values.done,
    Array.from({ length: STEPS }, (_, i) => i + 1),
    "every step once: resumed from the checkpoint",
  );
});
