import assert from "node:assert/strict";
import { spawn, type ChildProcess } from "node:child_process";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { TSX_LOADER } from "../../src/deployments/build/builder.ts";
import { storageSettings, tempHome } from "../support/dialects.ts";
import { TEST_LOCAL_ROOTS } from "../support/platform.ts";
import { freePort } from "../support/process.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { copyProject, FAST, FIXTURES, lastMessage, processesWithArg, runWait } from "./support.ts";

/** The promise: after kill -9 of the serving process, the other serves the deployment within this. */
const TAKEOVER_BOUND_MS = 10_000;

interface Platform {
  name: string;
  child: ChildProcess;
  url: string;
  /** Everything it printed (its log at warn level). */
  output(): string;
}

function startChild(name: string, env: Record<string, string>): Promise<Platform> {
  const child = spawn(process.execPath, ["--import", TSX_LOADER, path.join(FIXTURES, "platform-child.ts")], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  return new Promise((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => {
      out += d;
      const m = /READY (\S+)/.exec(out);
      if (m) resolve({ name, child, url: m[1], output: () => out });
    });
    child.stderr!.on("data", (d) => (out += d));
    child.once("exit", (code) => reject(new Error(`platform ${name} exited with ${code}: ${out}`)));
  });
}

/** The first deploy's bound: the build and deploy deadlines the platforms run with (FAST). */
const SETUP_MS = FAST.buildTimeoutMs! + FAST.deployTimeoutMs!;

/** The revision's status once it is DEPLOYED or failed, or when `ms` passed. */
async function statusWithin(p: Platform, apiKey: string, d: { id: string; latest_revision_id: string }, ms: number) {
  const start = Date.now();
  let status = "";
  while (Date.now() - start < ms) {
    const res = await fetch(`${p.url}/v2/deployments/${d.id}/revisions/${d.latest_revision_id}`, {
      headers: { "x-api-key": apiKey },
    }).catch(() => null);
    if (res?.ok) status = ((await res.json()) as { status: string }).status;
    if (status === "DEPLOYED" || status.endsWith("FAILED") || status === "INTERRUPTED") break;
    await new Promise((r) => setTimeout(r, 250));
  }
  return status;
}

/** Asks `url` to run the echo graph every 100–200 ms until it answers 200 or `ms` passed. */
async function answerWithin(url: string, apiKey: string, input: string, ms: number) {
  const start = Date.now();
  let run = { status: 0, body: {} as Record<string, unknown> };
  while (Date.now() - start < ms) {
    run = await runWait(url, apiKey, input).catch((err: Error) => ({ status: 0, body: { error: err.message } }));
    if (run.status === 200) break;
    await new Promise((r) => setTimeout(r, 150));
  }
  return { ...run, ms: Date.now() - start };
}

/**
 * What to read when the test fails, whichever phase: both revisions' logs as each process serves
 * them, the revision's row and history, and what each platform process printed.
 */
async function diagnostics(
  platforms: Platform[],
  apiKey: string,
  deploymentId: string | null,
  revisionId: string | null,
) {
  const parts: string[] = [];
  const get = async (p: Platform, route: string) => {
    try {
      const res = await fetch(`${p.url}${route}`, {
        headers: { "x-api-key": apiKey },
        signal: AbortSignal.timeout(5000),
      });
      return `${res.status} ${await res.text()}`;
    } catch (err) {
      return `(no answer: ${(err as Error).message})`;
    }
  };
  const base = `/v2/deployments/${deploymentId}/revisions/${revisionId}`;
  for (const p of platforms) {
    const alive = p.child.exitCode === null && p.child.signalCode === null;
    parts.push(
      `--- platform ${p.name} (pid ${p.child.pid}, ${alive ? "alive" : "dead"}) output:\n${p.output().slice(-4000)}`,
    );
    if (!alive || !deploymentId || !revisionId) continue;
    parts.push(`--- revision as ${p.name} reads it: ${await get(p, base)}`);
    for (const kind of ["build", "deploy"]) {
      const body = await get(p, `${base}/${kind}_logs?limit=300`);
      let lines = body;
      try {
        const logs = JSON.parse(body.slice(body.indexOf(" ") + 1)) as {
          logs: Array<{ timestamp?: string; message: string }>;
        };
        lines = logs.logs.map((l) => `${l.timestamp ?? ""} ${l.message}`).join("\n");
      } catch {
        // Not JSON: the raw answer is the diagnostic.
      }
      parts.push(`--- ${kind} log through ${p.name}:\n${lines}`);
    }
  }
  return parts.join("\n");
}

test("PostgreSQL, two platform processes: kill -9 of the one serving leaves no orphan and the other serves the deployment within 10 s", async (t) => {
  if (!requireCapability(t, isRoot(), "confined deployments need root")) return;
  const s = await storageSettings(t, "postgres");
  if (!s) return;
  const homeB = tempHome();
  const common = {
    DATABASE_URL: s.databaseUrl!,
    TEST_PG_SCHEMA: s.pgSchema!,
    TEST_LEASE_MS: "5000",
    // TAKEOVER_PRESENCE_GRACE_MS=5000 measures the lease path alone (for comparison).
    ...(process.env.TAKEOVER_PRESENCE_GRACE_MS && { TEST_PRESENCE_GRACE_MS: process.env.TAKEOVER_PRESENCE_GRACE_MS }),
    WHARF_MASTER_KEY: crypto.randomBytes(32).toString("base64"),
    WHARF_DEPLOY_LOCAL_ROOTS: TEST_LOCAL_ROOTS,
  };
  const a = await startChild("A", { ...common, WHARF_HOME: s.home, WHARF_PORT: String(await freePort()) });
  const b = await startChild("B", { ...common, WHARF_HOME: homeB, WHARF_PORT: String(await freePort()) });
  t.after(async () => {
    for (const c of [a.child, b.child]) c.kill("SIGKILL");
    await s.dropSchema();
    fs.rmSync(homeB, { recursive: true, force: true });
  });
  const apiKey = fs.readFileSync(path.join(s.home, "bootstrap-key"), "utf8").trim();
  let d: { id: string; latest_revision_id: string } | null = null;
  const figures: string[] = [];
  const say = (line: string) => {
    figures.push(line);
    console.log(line);
  };
  try {
    const createdAt = Date.now();
    const res = await fetch(`${a.url}/v2/deployments`, {
      method: "POST",
      headers: { "x-api-key": apiKey, "content-type": "application/json" },
      body: JSON.stringify({
        name: "ha",
        source: "internal_source",
        source_config: {},
        source_revision_config: { langgraph_config_path: "langgraph.json", local_path: copyProject(t, "echo") },
        secrets: [{ name: "REPLY_PREFIX", value: "ha" }],
      }),
    });
    assert.equal(res.status, 201, await res.clone().text());
    d = (await res.json()) as { id: string; latest_revision_id: string };
    // Served by whichever process won the rollout; reachable through both. The first deploy is
    // not what this test times: it may take as long as the platform's own build and deploy
    // deadlines allow (a loaded host's load check alone has taken 48 s).
    const deployed = await statusWithin(a, apiKey, d, SETUP_MS);
    say(`takeover test: revision ${deployed} ${Date.now() - createdAt} ms after the create`);
    assert.equal(deployed, "DEPLOYED");
    const first = await answerWithin(`${a.url}/deployments/${d.id}`, apiKey, "up", 30_000);
    say(`takeover test: first answer ${Date.now() - createdAt} ms after the create`);
    assert.equal(first.status, 200, `no first answer within 30 s of DEPLOYED: ${JSON.stringify(first.body)}`);
    assert.equal(lastMessage((await runWait(`${b.url}/deployments/${d.id}`, apiKey, "via b")).body), "ha: via b");

    // Kill the process that serves it (its agent server runs under it): find it by the server's parent chain.
    const serving = processesWithArg(d.id);
    assert.ok(serving.length > 0, "no agent server of the deployment runs");
    const servedByA = serving.some((pid) => ancestors(pid).includes(a.child.pid!));
    const victim = servedByA ? a : b;
    const survivor = servedByA ? b : a;
    say(
      `takeover test: served by ${victim.name} (pid ${victim.child.pid}); kill -9 of it, ${survivor.name} takes over`,
    );
    const killedAt = Date.now();
    victim.child.kill("SIGKILL");
    await new Promise((r) => victim.child.once("exit", r));
    const back = await answerWithin(`${survivor.url}/deployments/${d.id}`, apiKey, "after", 30_000);
    const takeoverMs = Date.now() - killedAt;
    say(`takeover after kill -9: ${takeoverMs} ms (served by ${survivor.name}, status ${back.status})`);
    await sayTakeover(survivor, apiKey, d, killedAt, say);
    assert.equal(back.status, 200, `no answer within 30 s of the kill: ${JSON.stringify(back.body)}`);
    assert.equal(lastMessage(back.body), "ha: after");
    assert.ok(takeoverMs <= TAKEOVER_BOUND_MS, `takeover took ${takeoverMs} ms`);
    // No orphan: every agent server of the deployment now runs under the survivor.
    for (const pid of processesWithArg(d.id))
      assert.ok(ancestors(pid).includes(survivor.child.pid!), `pid ${pid} is not the survivor's`);
  } catch (err) {
    const more = await diagnostics([a, b], apiKey, d?.id ?? null, d?.latest_revision_id ?? null);
    throw new Error(`${(err as Error).message}\n${figures.join("\n")}\n${more}`, { cause: err });
  }
});

/** The survivor's deploy log from the kill on, times relative to it: how it noticed, and its server's start. */
async function sayTakeover(
  survivor: Platform,
  apiKey: string,
  d: { id: string; latest_revision_id: string },
  killedAt: number,
  say: (line: string) => void,
): Promise<void> {
  const res = await fetch(
    `${survivor.url}/v2/deployments/${d.id}/revisions/${d.latest_revision_id}/deploy_logs?limit=300`,
    { headers: { "x-api-key": apiKey } },
  );
  const body = (await res.json()) as { logs?: Array<{ timestamp: string; message: string }> };
  const after = (body.logs ?? [])
    .map((l) => ({ at: Date.parse(l.timestamp) - killedAt, message: l.message }))
    .filter((l) => l.at >= 0);
  for (const l of after) say(`  +${l.at} ms ${l.message.slice(0, 200)}`);
  const noticed = after.find((l) => l.message.startsWith("serving it here"));
  const up = after.find((l) => l.message.startsWith("GET /ok answered"));
  say(
    `takeover test: noticed after ${noticed?.at ?? "?"} ms (${noticed?.message.includes("is gone") ? "presence lock" : "lease"}), serving after ${up?.at ?? "?"} ms`,
  );
}

function ancestors(pid: number): number[] {
  const out: number[] = [];
  let cur = pid;
  for (let i = 0; i < 20 && cur > 1; i++) {
    try {
      const stat = fs.readFileSync(`/proc/${cur}/stat`, "utf8");
      cur = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      out.push(cur);
    } catch {
      break;
    }
  }
  return out;
}
