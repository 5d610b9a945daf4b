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
import { copyProject, FIXTURES, lastMessage, processesWithArg, runWait } from "./support.ts";

function startChild(env: Record<string, string>): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ["--import", TSX_LOADER, path.join(FIXTURES, "platform-child.ts")], {
    env: { ...process.env, ...env },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  return new Promise((resolve, reject) => {
    child.stdout!.on("data", (d: Buffer) => {
      out += d;
      const m = /READY (\S+)/.exec(out);
      if (m) resolve({ child, url: m[1] });
    });
    child.stderr!.on("data", (d) => (out += d));
    child.once("exit", (code) => reject(new Error(`platform exited with ${code}: ${out}`)));
  });
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
    WHARF_MASTER_KEY: crypto.randomBytes(32).toString("base64"),
    WHARF_DEPLOY_LOCAL_ROOTS: TEST_LOCAL_ROOTS,
  };
  const a = await startChild({ ...common, WHARF_HOME: s.home, WHARF_PORT: String(await freePort()) });
  const b = await startChild({ ...common, WHARF_HOME: homeB, WHARF_PORT: String(await freePort()) });
  t.after(async () => {
    for (const c of [a.child, b.child]) c.kill("SIGKILL");
    await s.dropSchema();
    fs.rmSync(homeB, { recursive: true, force: true });
  });
  const apiKey = fs.readFileSync(path.join(s.home, "bootstrap-key"), "utf8").trim();
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
  assert.equal(res.status, 201);
  const d = (await res.json()) as { id: string; latest_revision_id: string };
  const urlB = `${b.url}/deployments/${d.id}`;
  // Served by whichever process won the rollout; reachable through both.
  const deadline = Date.now() + 60_000;
  let run = { status: 0, body: {} as Record<string, unknown> };
  while (run.status !== 200 && Date.now() < deadline) {
    run = await runWait(`${a.url}/deployments/${d.id}`, apiKey, "up").catch(() => ({ status: 0, body: {} }));
    if (run.status !== 200) await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(run.status, 200, JSON.stringify(run.body));
  assert.equal(lastMessage((await runWait(urlB, apiKey, "via b")).body), "ha: via b");
  const ownerRow = await fetch(`${a.url}/v2/deployments/${d.id}/revisions/${d.latest_revision_id}`, {
    headers: { "x-api-key": apiKey },
  });
  assert.equal(ownerRow.status, 200);

  // Kill the process that serves it (its agent server runs under it): find it by the server's parent chain.
  const serving = processesWithArg(d.id);
  assert.ok(serving.length > 0);
  const servedByA = serving.some((pid) => ancestors(pid).includes(a.child.pid!));
  const victim = servedByA ? a : b;
  const survivor = servedByA ? b : a;
  const killedAt = Date.now();
  victim.child.kill("SIGKILL");
  await new Promise((r) => victim.child.once("exit", r));
  let back = { status: 0, body: {} as Record<string, unknown> };
  while (Date.now() - killedAt < 20_000) {
    back = await runWait(`${survivor.url}/deployments/${d.id}`, apiKey, "after").catch(() => ({ status: 0, body: {} }));
    if (back.status === 200) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  const takeoverMs = Date.now() - killedAt;
  if (back.status !== 200) {
    const logs = await (
      await fetch(`${survivor.url}/v2/deployments/${d.id}/revisions/${d.latest_revision_id}/deploy_logs?limit=200`, {
        headers: { "x-api-key": apiKey },
      })
    ).json();
    assert.fail(
      `no answer after kill -9 (${back.status} ${JSON.stringify(back.body)}):\n${(logs.logs as Array<{ message: string }>).map((l) => l.message).join("\n")}`,
    );
  }
  assert.equal(lastMessage(back.body), "ha: after");
  console.log(`takeover after kill -9: ${takeoverMs} ms`);
  assert.ok(takeoverMs <= 10_000, `takeover took ${takeoverMs} ms`);
  // No orphan: every agent server of the deployment now runs under the survivor.
  for (const pid of processesWithArg(d.id))
    assert.ok(ancestors(pid).includes(survivor.child.pid!), `pid ${pid} is not the survivor's`);
});

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
