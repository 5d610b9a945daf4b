import assert from "node:assert/strict";
import dns from "node:dns/promises";
import path from "node:path";
import { after, describe, test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import { runPythonClient, sdkPython } from "../support/python-client.ts";
import { isRoot, pythonAvailable, requireCapability } from "../support/requirements.ts";
import { defaultRunnerCommand } from "../../src/deployments/runtime/agent-process.ts";
import { startEgressPlatform } from "./egress-support.ts";
import type { TestPlatform } from "../support/platform.ts";
import { FIXTURES, logsOf, pollRevision } from "./support.ts";
import type { TestContext } from "node:test";

const here = import.meta.dirname;
const TEMPLATE = path.resolve(here, "../agent-server/fixtures/python-template");
const HOSTILE = path.join(FIXTURES, "projects", "python-hostile");
const BROKEN = path.join(FIXTURES, "projects", "python-broken");
const EXPECTED = { changeme: "output from call_model. Configured with x" };
/** Creating a Python environment downloads from PyPI: builds get minutes, not the usual 60 s. */
const SLOW = { buildTimeoutMs: 600_000, deployTimeoutMs: 120_000 };

/**
 * Where PyPI's names resolve on this machine: the platform's operator allows them when they are an
 * internal address (a PyPI mirror on a private or reserved network), as `docs/egress.md` says.
 */
async function pypiMirror(): Promise<string> {
  const addrs = await Promise.all(
    ["pypi.org", "files.pythonhosted.org"].map((h) => dns.lookup(h, { all: true }).catch(() => [])),
  );
  return [...new Set(addrs.flat().map((a) => `${a.address}/${a.family === 6 ? 128 : 32}`))].join(",");
}

/** A deployment whose revision finished (its status checked by the test that reads it). */
interface Deployed {
  d: { id: string; source_config: { custom_url: string } };
  rev: Awaited<ReturnType<typeof pollRevision>> & { status_message?: string | null };
  url: string;
  build: string;
  deployLog: string;
}

/**
 * One platform for the file, and every project's deployment created at once when the first test
 * asks: their confined builds (each creates its own Python environment from PyPI) overlap instead
 * of queueing behind each other, so the file stays within the runner's per-file limit on a loaded
 * machine. Cleaned up when the file's tests are done.
 */
class SharedPlatform {
  private readonly cleanups: Array<() => unknown> = [];
  /** What the platform helpers need of a test context: where to register their cleanup. */
  private readonly scope = { after: (fn: () => unknown) => void this.cleanups.push(fn) } as unknown as TestContext;
  private started: Promise<{ p: TestPlatform; deployments: Map<string, Promise<Deployed>> }> | null = null;

  /** The platform and the revision of `localPath`'s deployment (all started at the first call). */
  async deployment(localPath: string): Promise<{ p: TestPlatform } & Deployed> {
    this.started ??= this.start();
    const { p, deployments } = await this.started;
    const up = deployments.get(localPath);
    assert.ok(up, `${localPath} is not one of this file's projects`);
    return { p, ...(await up) };
  }

  private async start() {
    // With the egress proxy: the build reaches PyPI through it, as any deployment's build would.
    // The egress proxy reads its settings from the environment once per process.
    process.env.WHARF_EGRESS_ALLOW_INTERNAL = await pypiMirror();
    const p = (await startEgressPlatform(this.scope, {
      options: { runnerCommand: defaultRunnerCommand, runnerBinds: [], ...SLOW },
    }))!;
    // The official Python client's environment (the template's test drives it) is made meanwhile.
    sdkPython().catch(() => {});
    const template = deployOn(p, TEMPLATE);
    const broken = deployOn(p, BROKEN);
    // The hostile project needs only the worker's packages, as the broken one: deployed once that
    // build made the workspace's environment for them (before its graph check fails), it reuses it.
    const hostile = broken.then(
      () => deployOn(p, HOSTILE),
      () => deployOn(p, HOSTILE),
    );
    const deployments = new Map<string, Promise<Deployed>>([
      [TEMPLATE, template],
      [BROKEN, broken],
      [HOSTILE, hostile],
    ]);
    // Awaited by their own tests later: a failure meanwhile is that test's, not an unhandled rejection.
    for (const up of deployments.values()) up.catch(() => {});
    return { p, deployments };
  }

  async close(): Promise<void> {
    for (const fn of this.cleanups.reverse()) await fn();
  }
}

async function deployOn(p: TestPlatform, localPath: string): Promise<Deployed> {
  const res = await p.api("/v2/deployments", {
    method: "POST",
    json: {
      name: path.basename(localPath),
      source: "internal_source",
      source_config: {},
      source_revision_config: { langgraph_config_path: "langgraph.json", local_path: localPath },
      secrets: [],
    },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const d = await res.json();
  const rev = await pollRevision(p, d.id, d.latest_revision_id, 600_000);
  return {
    d,
    rev,
    url: d.source_config.custom_url as string,
    build: await logsOf(p, d.id, rev.id, "build"),
    deployLog: await logsOf(p, d.id, rev.id, "deploy"),
  };
}

const shared = new SharedPlatform();

async function deploy(t: TestContext, localPath: string, expect = "DEPLOYED") {
  if (!requireCapability(t, process.platform === "linux" && isRoot(), "confined deployments need root on Linux"))
    return null;
  if (!requireCapability(t, await pythonAvailable(), "python3 (3.11+) with venv is needed for Python projects"))
    return null;
  const up = await shared.deployment(localPath);
  assert.equal(up.rev.status, expect, `${up.rev.status_message}\n${up.build}\n${up.deployLog}`);
  return up;
}

describe("deployments of Python projects", () => {
  after(() => shared.close());

  test("the official new-langgraph-project template deploys through POST /v2/deployments and serves the Python and JS clients at its stable URL", async (t) => {
    const up = await deploy(t, TEMPLATE);
    if (!up) return;
    assert.match(up.build, /creating the Python environment/);
    const python = await sdkPython();
    const out = await runPythonClient(python, path.join(here, "python-client/deployment_flows.py"), [
      up.url,
      up.p.apiKey,
    ]);
    assert.match(out, /^ok sync=\d+ async=\d+/m);
    const js = new Client({ apiUrl: up.url, apiKey: up.p.apiKey, callerOptions: { maxRetries: 0 } });
    assert.deepEqual(
      await js.runs.wait(null, "agent", { input: { changeme: "hi" }, context: { my_configurable_param: "x" } }),
      EXPECTED,
    );

    // A new revision (a PATCH) builds and serves again.
    const res = await up.p.api(`/v2/deployments/${up.d.id}`, {
      method: "PATCH",
      json: { secrets: [{ name: "SOME_FLAG", value: "1" }] },
    });
    assert.equal(res.status, 200, await res.clone().text());
    const again = await res.json();
    const rev = await pollRevision(up.p, up.d.id, again.latest_revision_id, 600_000);
    assert.equal(rev.status, "DEPLOYED", rev.status_message ?? "");
    assert.deepEqual(
      await js.runs.wait(null, "agent", { input: { changeme: "hi" }, context: { my_configurable_param: "x" } }),
      EXPECTED,
    );
  });

  test("a hostile Python graph reads nothing of the platform's, and one ending the interpreter in a node leaves the platform and the other graphs serving", async (t) => {
    const up = await deploy(t, HOSTILE);
    if (!up) return;
    assert.match(
      up.build,
      /Python environment [0-9a-f]{16} is cached: reusing it/,
      "the workspace's environment for the same dependencies was made again",
    );
    const { p, url } = up;
    const js = new Client({ apiUrl: url, apiKey: p.apiKey, callerOptions: { maxRetries: 0 } });
    const platformFiles = [
      path.join(p.home, "wharf.db"),
      path.join(p.home, "master.key"),
      "/etc/shadow",
      `/proc/${process.pid}/environ`,
      `/proc/${process.pid}/cmdline`,
    ];
    const snooped = JSON.parse(
      ((await js.runs.wait(null, "snoop", { input: { paths: platformFiles } })) as { out: string }).out,
    ) as { files: Record<string, string>; env: string[]; pids: string[] };
    for (const f of platformFiles.slice(0, 3)) assert.match(snooped.files[f], /^refused/, `${f} was readable`);
    // Its pid namespace holds only the deployment's processes: the platform's pid is not its own.
    for (const f of platformFiles.slice(3))
      assert.ok(
        snooped.files[f].startsWith("refused") || !snooped.files[f].includes(p.home),
        `${f}: ${snooped.files[f]}`,
      );
    for (const name of ["WHARF_HOME", "DATABASE_URL", "WHARF_SECRETS_KEY", "WHARF_PYTHON_ENVS_HOST"])
      assert.ok(!snooped.env.includes(name), `${name} is in the graph's environment`);
    assert.ok(snooped.pids.length < 20, `the graph sees ${snooped.pids.length} processes`);

    // os._exit in a node: that run fails, the worker comes back, the platform never stopped.
    await assert.rejects(
      js.runs.wait(null, "crash", { input: {} }).then((v) => {
        if ((v as { __error__?: unknown }).__error__) throw new Error("run failed");
        return v;
      }),
    );
    assert.equal((await p.api("/v2/deployments")).status, 200);
    const deadline = Date.now() + 60_000;
    for (;;) {
      const v = await js.runs.wait(null, "echo", { input: {} }).catch((e: Error) => e);
      if (!(v instanceof Error) && (v as { out?: string }).out === "echo") break;
      assert.ok(
        Date.now() < deadline,
        `echo did not serve again: ${String(v instanceof Error ? v.message : JSON.stringify(v))}`,
      );
      await new Promise((r) => setTimeout(r, 500));
    }
  });

  test("a Python graph that fails to import fails the build naming it, with its error in the build log", async (t) => {
    const up = await deploy(t, BROKEN, "BUILD_FAILED");
    if (!up) return;
    assert.match(up.rev.status_message ?? "", /graph broken failed to load/);
    assert.match(up.build, /graph broken: .*a_module_nobody_published/);
  });
});
