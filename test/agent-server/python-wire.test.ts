import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import { runPythonClient, sdkPython } from "../support/python-client.ts";
import { pythonAvailable, requireCapability, TEST_PYTHON_ENVS } from "../support/requirements.ts";
import { startTestAgentServer } from "./support.ts";

process.env.WHARF_PYTHON_ENVS = TEST_PYTHON_ENVS;
const here = import.meta.dirname;
const PROJECT = path.join(here, "fixtures/python-wire");
const RECORDED = path.join(PROJECT, "recorded.json");

/**
 * Where Wharf answers differently from `langgraph dev` on purpose, and why. Keys are flow names of
 * wire_flows.py; each names the JSON paths (dot-joined, `*` for any key or index) left out of the comparison.
 */
const THREAD_ROW = {
  paths: ["config", "error", "state_updated_at"],
  why: "thread rows are the agent server's, shared with JS graphs: newer Python servers add `error` and `state_updated_at` and an empty `config`, which Wharf's thread API (and the JS server) do not have",
};
const THREAD_METADATA = {
  paths: ["metadata.case"],
  why: "the Python server copies a thread's metadata into each run's checkpoint metadata; Wharf's run metadata is the assistant's and the run's, as for JS graphs",
};
const DEVIATIONS: Record<string, { paths: string[]; why: string }> = {
  "hitl.thread": THREAD_ROW,
  "hitl.thread.after": THREAD_ROW,
  "hitl.state": THREAD_METADATA,
  "hitl.state[subgraphs]": THREAD_METADATA,
  "hitl.state.after": THREAD_METADATA,
  "hitl.history": { ...THREAD_METADATA, paths: ["*.metadata.case"] },
};

type Json = unknown;

function drop(value: Json, pattern: string[]): Json {
  if (!pattern.length || value === null || typeof value !== "object") return value;
  const [head, ...rest] = pattern;
  if (Array.isArray(value))
    return value
      .map((v, i) => (head === "*" || head === String(i) ? (rest.length ? drop(v, rest) : undefined) : v))
      .filter((v) => v !== undefined);
  const out: Record<string, Json> = {};
  for (const [k, v] of Object.entries(value)) {
    if (head === "*" || head === k) {
      if (rest.length) out[k] = drop(v, rest);
    } else out[k] = v;
  }
  return out;
}

const without = (flow: string, value: Json) =>
  (DEVIATIONS[flow]?.paths ?? []).reduce((v, p) => drop(v, p.split(".")), value);

test("the official Python client sees the same wire from Wharf as from langgraph dev (recorded fixtures, ids and times normalised)", async (t) => {
  if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python projects")) return;
  const python = await sdkPython();
  const server = await startTestAgentServer(t, { project: PROJECT, open: true });
  if (!server) return;
  const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "wharf-wire-")), "wharf.json");
  await runPythonClient(python, path.join(here, "python-client/wire_flows.py"), [server.url, out]);
  const expected = JSON.parse(fs.readFileSync(RECORDED, "utf8")) as Record<string, Json>;
  const actual = JSON.parse(fs.readFileSync(out, "utf8")) as Record<string, Json>;
  assert.deepEqual(Object.keys(actual).sort(), Object.keys(expected).sort());
  const differing = Object.keys(expected).filter((flow) => {
    try {
      assert.deepEqual(without(flow, actual[flow]), without(flow, expected[flow]));
      return false;
    } catch {
      return true;
    }
  });
  for (const flow of differing)
    await t.test(flow, () => assert.deepEqual(without(flow, actual[flow]), without(flow, expected[flow])));
  assert.deepEqual(differing, [], `flows that differ from langgraph dev (Wharf's output: ${out})`);
});
