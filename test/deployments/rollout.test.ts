import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { Client } from "@langchain/langgraph-sdk";
import type { TestPlatform } from "../support/platform.ts";
import { copyProject, lastMessage, logsOf, pollRevision, runWait, startDeploymentsPlatform } from "./support.ts";

async function createDeployed(
  p: TestPlatform,
  name: string,
  dir: string,
  secrets: Array<{ name: string; value: string }> = [],
) {
  const res = await p.api("/v2/deployments", {
    method: "POST",
    json: {
      name,
      source: "internal_source",
      source_config: {},
      source_revision_config: { langgraph_config_path: "langgraph.json", local_path: dir },
      secrets,
    },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const d = await res.json();
  const rev = await pollRevision(p, d.id, d.latest_revision_id);
  assert.equal(
    rev.status,
    "DEPLOYED",
    `${rev.status_message}\n${await logsOf(p, d.id, rev.id, "build")}\n${await logsOf(p, d.id, rev.id, "deploy")}`,
  );
  return { id: d.id as string, url: d.source_config.custom_url as string, revisionId: rev.id };
}

async function patch(p: TestPlatform, id: string, json: unknown): Promise<string> {
  const res = await p.api(`/v2/deployments/${id}`, { method: "PATCH", json });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()).latest_revision_id;
}

async function steps(p: TestPlatform, id: string, rev: string): Promise<string[]> {
  const res = await p.api(`/v2/deployments/${id}/revisions/${rev}/transitions`);
  return (await res.json()).map((s: { to_status: string }) => s.to_status);
}

describe("deployment rollouts", () => {
  test("a PATCH under continuous load from the official SDK: zero failed requests, in-flight requests finish on the old revision", async (t) => {
    const p = (await startDeploymentsPlatform(t))!;
    const d = await createDeployed(p, "load", copyProject(t, "echo"), [{ name: "REPLY_PREFIX", value: "old" }]);
    const client = new Client({ apiUrl: d.url, apiKey: p.apiKey });
    const failures: string[] = [];
    const seen = new Map<string, number>();
    // When the switch had happened at the latest: the start of the first request the new revision
    // answered, seen by the clients themselves (a poll of the revision's status, or the time that
    // answer arrived, can come after the old revision's in-flight requests already finished).
    let firstNewAt = Infinity;
    const slowDone: Array<{ at: number; revision: string }> = [];
    let stop = false;
    const worker = async () => {
      while (!stop) {
        try {
          const startedAt = Date.now();
          const out = (await client.runs.wait(null, "echo", {
            input: { messages: [{ role: "human", content: "ping" }] },
          })) as Record<string, unknown>;
          const text = lastMessage(out);
          seen.set(text, (seen.get(text) ?? 0) + 1);
          if (text.startsWith("new:")) firstNewAt = Math.min(firstNewAt, startedAt);
          if (!/^(old|new): ping$/.test(text)) failures.push(`unexpected answer ${text}`);
        } catch (err) {
          failures.push(String(err));
        }
      }
    };
    const slow = async () => {
      while (!stop) {
        const res = await fetch(`${d.url}/slow?ms=700`, { headers: { "x-api-key": p.apiKey } }).catch(
          (e) => e as Error,
        );
        if (res instanceof Error || res.status !== 200) {
          failures.push(`slow request: ${res instanceof Error ? res.message : res.status}`);
          continue;
        }
        const body = await res.json();
        slowDone.push({ at: Date.now(), revision: body.revision });
      }
    };
    const workers = [worker(), worker(), worker(), worker(), slow(), slow()];
    await new Promise((r) => setTimeout(r, 500));
    const next = await patch(p, d.id, { secrets: [{ name: "REPLY_PREFIX", value: "new" }] });
    const rev = await pollRevision(p, d.id, next);
    assert.equal(rev.status, "DEPLOYED");
    await new Promise((r) => setTimeout(r, 1500));
    stop = true;
    await Promise.all(workers);
    assert.deepEqual(failures, []);
    assert.ok((seen.get("old: ping") ?? 0) > 0 && (seen.get("new: ping") ?? 0) > 0, JSON.stringify([...seen]));
    const slowOnOld = slowDone.filter((r) => r.revision === d.revisionId && r.at > firstNewAt).length;
    assert.ok(
      slowOnOld > 0,
      `requests in flight at the switch finished on the old revision: ${JSON.stringify({ firstNewAt, slowDone })}`,
    );
    // A secrets-only change deploys the same build again: no BUILDING step.
    assert.deepEqual(await steps(p, d.id, next), [
      "CREATING",
      "QUEUED",
      "AWAITING_BUILD",
      "AWAITING_DEPLOY",
      "DEPLOYING",
      "DEPLOYED",
    ]);
    // The old revision's server is stopped once drained.
    const deadline = Date.now() + 10_000;
    let logs = "";
    while (Date.now() < deadline && !/drained, stopping|stopping anyway/.test(logs)) {
      await new Promise((r) => setTimeout(r, 200));
      logs = await logsOf(p, d.id, d.revisionId, "deploy");
    }
    assert.match(logs, /replaced by revision .*: drained, stopping/);
  });

  test("streaming passes through the stable URL unbuffered", async (t) => {
    const p = (await startDeploymentsPlatform(t))!;
    const d = await createDeployed(p, "sse", copyProject(t, "echo"));
    const started = performance.now();
    const res = await fetch(`${d.url}/runs/stream?delay=800`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": p.apiKey },
      body: JSON.stringify({
        assistant_id: "echo",
        input: { messages: [{ role: "human", content: "s" }] },
        stream_mode: ["values"],
      }),
    });
    assert.equal(res.status, 200);
    assert.equal(res.headers.get("content-type"), "text/event-stream");
    assert.equal(res.headers.get("content-location"), `/deployments/${d.id}/runs/fake-run`);
    const reader = res.body!.getReader();
    const first = await reader.read();
    const firstAt = performance.now() - started;
    assert.match(Buffer.from(first.value!).toString(), /^event: metadata/);
    let rest = "";
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      rest += Buffer.from(value).toString();
    }
    const total = performance.now() - started;
    assert.match(rest, /event: values/);
    assert.ok(
      firstAt < 600 && total - firstAt > 500,
      `first chunk after ${Math.round(firstAt)} ms, end after ${Math.round(total)} ms`,
    );
  });

  test("a broken project ends BUILD_FAILED with a useful log while the old revision keeps serving; a graph failing on arbitrary input deploys; a failing opt-in smoke run ends DEPLOY_FAILED", async (t) => {
    const p = (await startDeploymentsPlatform(t))!;
    const d = await createDeployed(p, "broken", copyProject(t, "echo"), [{ name: "REPLY_PREFIX", value: "good" }]);
    const broken = copyProject(t, "broken");
    let next = await patch(p, d.id, { source_revision_config: { local_path: broken } });
    let rev = await pollRevision(p, d.id, next);
    assert.equal(rev.status, "BUILD_FAILED");
    assert.match(rev.status_message!, /graph broken failed to load/);
    assert.match(await logsOf(p, d.id, next, "build"), /wharf-fixture-package-that-does-not-exist/);
    assert.equal(lastMessage((await runWait(d.url, p.apiKey, "still")).body), "good: still");
    let dep = await (await p.api(`/v2/deployments/${d.id}`)).json();
    assert.equal(dep.active_revision_id, d.revisionId);
    assert.equal(dep.latest_revision_id, next);

    // A graph that fails on arbitrary input still deploys: readiness runs nothing.
    const good = copyProject(t, "echo");
    next = await patch(p, d.id, {
      source_revision_config: { local_path: good },
      secrets: [
        { name: "REPLY_PREFIX", value: "picky" },
        { name: "FAIL_ON", value: "health" },
      ],
    });
    rev = await pollRevision(p, d.id, next);
    assert.equal(rev.status, "DEPLOYED", rev.status_message ?? "");
    assert.doesNotMatch(await logsOf(p, d.id, next, "deploy"), /smoke run/);
    assert.equal(lastMessage((await runWait(d.url, p.apiKey, "fine")).body), "picky: fine");

    // With an opt-in smoke input that the graph refuses, the revision fails and the old one serves.
    next = await patch(p, d.id, {
      source_config: { smoke_input: { messages: [{ role: "human", content: "health" }] } },
      secrets: [
        { name: "REPLY_PREFIX", value: "smoked" },
        { name: "FAIL_ON", value: "health" },
      ],
    });
    rev = await pollRevision(p, d.id, next);
    assert.equal(rev.status, "DEPLOY_FAILED");
    assert.match(rev.status_message!, /smoke run of graph echo failed: .*refuses to answer "health"/);
    assert.equal(lastMessage((await runWait(d.url, p.apiKey, "still")).body), "picky: still");
    dep = await (await p.api(`/v2/deployments/${d.id}`)).json();
    assert.notEqual(dep.active_revision_id, next);
  });

  test("rollback: redeploy an earlier revision's build without rebuilding", async (t) => {
    const p = (await startDeploymentsPlatform(t))!;
    const a = copyProject(t, "echo");
    const b = copyProject(t, "echo");
    fs.writeFileSync(
      path.join(b, "graph.ts"),
      fs.readFileSync(path.join(b, "graph.ts"), "utf8").replace('?? "echo"', '?? "b"'),
    );
    const d = await createDeployed(p, "rollback", a);
    const second = await patch(p, d.id, { source_revision_config: { local_path: b } });
    assert.equal((await pollRevision(p, d.id, second)).status, "DEPLOYED");
    assert.equal(lastMessage((await runWait(d.url, p.apiKey, "x")).body), "b: x");
    fs.rmSync(a, { recursive: true }); // the source is gone: only the build remains
    const res = await p.api(`/v2/deployments/${d.id}/revisions/${d.revisionId}/redeploy`, { method: "POST" });
    assert.equal(res.status, 200);
    const third = (await res.json()).latest_revision_id;
    assert.notEqual(third, second);
    const rev = await pollRevision(p, d.id, third);
    assert.equal(rev.status, "DEPLOYED", rev.status_message ?? "");
    assert.ok(!(await steps(p, d.id, third)).includes("BUILDING"));
    assert.match(await logsOf(p, d.id, third, "build"), /reusing the build of revision/);
    assert.equal(lastMessage((await runWait(d.url, p.apiKey, "x")).body), "echo: x");
  });

  test("a newer PATCH supersedes a queued revision (SKIPPED); interrupting a build ends it INTERRUPTED", async (t) => {
    const p = (await startDeploymentsPlatform(t))!;
    const d = await createDeployed(p, "supersede", copyProject(t, "echo"));
    const slowDir = copyProject(t, "echo");
    const building = await patch(p, d.id, {
      source_revision_config: { local_path: slowDir },
      secrets: [{ name: "SLOW_IMPORT_MS", value: "4000" }],
    });
    const queued = await patch(p, d.id, { secrets: [{ name: "REPLY_PREFIX", value: "q1" }] });
    const newest = await patch(p, d.id, { secrets: [{ name: "REPLY_PREFIX", value: "q2" }] });
    assert.equal((await pollRevision(p, d.id, queued)).status, "SKIPPED");
    let res = await p.api(`/v2/deployments/${d.id}/revisions/${building}/interrupt`, { method: "POST" });
    assert.equal(res.status, 200);
    assert.equal((await res.json()).status, "INTERRUPTED");
    const last = await pollRevision(p, d.id, newest);
    assert.equal(last.status, "DEPLOYED", last.status_message ?? "");
    assert.equal(lastMessage((await runWait(d.url, p.apiKey, "z")).body), "q2: z");
    res = await p.api(`/v2/deployments/${d.id}/revisions?status=SKIPPED,INTERRUPTED`);
    assert.deepEqual((await res.json()).resources.map((r: { status: string }) => r.status).sort(), [
      "INTERRUPTED",
      "SKIPPED",
    ]);
  });
});
