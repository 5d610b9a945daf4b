import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { WHARF_ROOT } from "../../src/deployments/layout.ts";
import { DIALECTS } from "../support/dialects.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import type { TestPlatform } from "../support/platform.ts";
import { startEgressPlatform } from "./egress-support.ts";
import { copyProject, lastMessage, logsOf, pollRevision, runWait, stateFile } from "./support.ts";

async function deploy(p: TestPlatform, name: string, dir: string) {
  const res = await p.api("/v2/deployments", {
    method: "POST",
    json: {
      name,
      source: "internal_source",
      source_config: {},
      source_revision_config: { langgraph_config_path: "langgraph.json", local_path: dir },
      secrets: [],
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

/** Every probe but the positive controls must say "denied". */
function assertAllDenied(where: string, results: Record<string, string>, expected: string[]): void {
  for (const name of expected) {
    assert.ok(name in results, `${where}: probe ${name} did not run: ${JSON.stringify(results)}`);
    assert.match(results[name], /^denied: /, `${where}: ${name} was not refused: ${results[name]}`);
  }
}

const PROBES = [
  "readMasterKey",
  "readDatabase",
  "listHome",
  "otherState",
  "otherDatabase",
  "otherBuild",
  "otherSocket",
  "platformProc",
  "hostProcesses",
  "controlPlane",
  "postgres",
  "writeRuntime",
  "writeEtc",
  "writeHome",
  "writeUsr",
  "envHome",
  "envDatabase",
];

for (const dialect of DIALECTS)
  describe(`deployed code is confined (${dialect})`, () => {
    test("a hostile project's install script and graph cannot read the platform's home, database, processes or other deployments, reach host services, or write outside its state folder", async (t) => {
      if (!requireCapability(t, isRoot(), "confining deployments needs root (namespaces, cgroups)")) return;
      // With the egress proxy, as the platform runs: the way out must not open a way to the host.
      const p = await startEgressPlatform(t, { dialect });
      if (!p) return;
      const other = await deploy(p, "victim", copyProject(t, "echo"));
      // The victim writes something to its own state folder so there is something to steal.
      assert.equal((await runWait(other.url, p.apiKey, "secret")).status, 200);
      const otherState = path.join(p.home, "deployments", "state", other.id);
      fs.writeFileSync(path.join(otherState, "wharf.db"), "victim data");

      const dir = copyProject(t, "hostile");
      fs.writeFileSync(
        path.join(dir, "targets.json"),
        JSON.stringify({
          home: p.home,
          otherState,
          otherBuild: path.join(p.home, "deployments", "builds", other.revisionId),
          otherSocket: `/run/wharf-deployments/${other.revisionId}/agent.sock`,
          platformPid: process.pid,
          platformPort: Number(new URL(p.url).port),
          wharfRoot: WHARF_ROOT,
        }),
      );
      const hostile = await deploy(p, "hostile", dir);

      const buildLog = await logsOf(p, hostile.id, hostile.revisionId, "build");
      const line = buildLog.split("\n").find((l) => l.startsWith("PROBE "));
      assert.ok(line, `the install script did not run:\n${buildLog}`);
      const fromInstall = JSON.parse(line.slice("PROBE ".length)) as Record<string, string>;
      assertAllDenied("install script", fromInstall, PROBES);

      const run = await runWait(hostile.url, p.apiKey, "go", "probe");
      assert.equal(run.status, 200, JSON.stringify(run.body));
      if (!lastMessage(run.body).startsWith('{"readMasterKey')) console.error("GRAPH RUN", JSON.stringify(run.body));
      const fromGraph = JSON.parse(lastMessage(run.body)) as Record<string, string>;
      assert.ok("readMasterKey" in fromGraph, `the graph's probes did not run: ${JSON.stringify(run.body)}`);
      // On PostgreSQL the agent server's namespace has the database forwarder on 127.0.0.1:5432: the
      // TCP connect succeeds there, and the forwarder admits only the deployment's own role and
      // database (test/deployments/postgres-storage.test.ts connects as the superuser and another role).
      const graphProbes = [...PROBES, "writeBuild", "gatewayControlPlane", "gatewayKeys", "gatewayWithoutKey"].filter(
        (n) => !(dialect === "postgres" && n === "postgres"),
      );
      assertAllDenied("graph", fromGraph, graphProbes);
      // The data plane itself answers through the gateway (404 here: this platform has no sandboxes feature).
      assert.equal(fromGraph.gatewayDataPlane, "reachable");
      assert.equal(fromGraph.gatewayControlPlane, "denied: 403");
      assert.equal(fromGraph.gatewayWithoutKey, "denied: 401");
      // What a deployment may do: run as an unprivileged uid, write its own state folder.
      assert.equal(fromGraph.uid, "1000");
      assert.equal(fromGraph.stateWritable, "ok");
      assert.equal(fs.readFileSync(await stateFile(p, hostile.id, "mine.txt"), "utf8"), "ok");
      // Its key is its own: not the platform's master key.
      assert.ok(fromGraph.agentKey.length > 0);
      const masterFile = path.join(p.home, "master.key");
      if (fs.existsSync(masterFile)) assert.ok(!fs.readFileSync(masterFile, "utf8").includes(fromGraph.agentKey));
      // The platform and the victim are untouched.
      assert.equal(fs.readFileSync(path.join(otherState, "wharf.db"), "utf8"), "victim data");
      assert.ok(!fs.existsSync(path.join(p.home, "evil")));
      assert.ok(!fs.existsSync(path.join(p.home, "deployments", "builds", hostile.revisionId, "evil")));

      // Deleting the deployment deletes its state folder (its database) before DELETE answers: a
      // server (re)start racing the deletion stops itself before the folder is removed.
      const del = await p.api(`/v2/deployments/${hostile.id}`, { method: "DELETE" });
      assert.equal(del.status, 204);
      assert.ok(!fs.existsSync(path.join(p.home, "deployments", "state", hostile.id)));
      assert.ok(
        !fs.existsSync(path.join(p.home, "deployments", "egress", `dep-${hostile.revisionId}`)),
        "its egress files are gone with its server",
      );
    });
  });
