// The official deploy clients, unmodified, from their registries, against a Wharf:
// npm's `langgraphjs deploy` (@langchain/langgraph-cli) and PyPI's `langgraph deploy` (langgraph-cli).
import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test, type TestContext } from "node:test";
import type { TestPlatform } from "../support/platform.ts";
import { copyProject, startDeploymentsPlatform } from "./support.ts";
import { jsCli, pyCli, runCli, type CliRun } from "./official-clis-support.ts";

/** Every build-log line printed by `deploy --verbose` (the CLIs prefix them differently). */
const buildLines = (out: string) =>
  out.split("\n").filter((l) => /extracting uploaded tarball|graphs in langgraph\.json|loading graphs/.test(l));

async function scenarios(t: TestContext, label: string, bin: string): Promise<void> {
  const p: TestPlatform = (await startDeploymentsPlatform(t))!;
  const home = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-cli-home-"));
  t.after(() => fs.rmSync(home, { recursive: true, force: true }));
  const name = `cli-${label}`;
  const cli = (dir: string, ...args: string[]): Promise<CliRun> =>
    runCli(bin, [...args, "--host-url", p.url], { cwd: dir, apiKey: p.apiKey, home });
  const dir = copyProject(t, "echo");

  // deploy (remote build of an uploaded tarball), build log streamed once while the CLI polls it
  // (the build command keeps it BUILDING across several of the CLIs' polls)
  let r = await cli(dir, "deploy", "--remote", "--verbose", "--name", name, "--no-input", "--build-command", "sleep 7");
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /Deployment successful/);
  // The CLIs fetch build logs only while the status is BUILDING, every 3 s, and not once more after:
  // lines written in a build's last seconds (the graph load check after `sleep 7`) may go unprinted.
  const lines = buildLines(r.out);
  const count = (re: RegExp) => lines.filter((l) => re.test(l)).length;
  assert.equal(count(/extracting uploaded tarball/), 1, `each build line once:\n${r.out}`);
  assert.equal(count(/graphs in langgraph\.json/), 1, `each build line once:\n${r.out}`);
  assert.ok(count(/loading graphs/) <= 1, `each build line once:\n${r.out}`);
  const id = (await (await p.api(`/v2/deployments?name_contains=${name}`)).json()).resources[0].id as string;

  // a second deploy of the same name updates it (a new revision)
  r = await cli(dir, "deploy", "--remote", "--name", name, "--no-input");
  assert.equal(r.code, 0, r.out);

  // list
  r = await cli(dir, "deploy", "list");
  assert.equal(r.code, 0, r.out);
  assert.ok(r.out.includes(id) && r.out.includes(name), r.out);

  // revisions list
  r = await cli(dir, "deploy", "revisions", "list", id);
  assert.equal(r.code, 0, r.out);
  // the CLIs show the revision no longer served as REPLACED
  assert.equal((r.out.match(/DEPLOYED/g) ?? []).length, 1, r.out);
  assert.equal((r.out.match(/REPLACED/g) ?? []).length, 1, r.out);

  // logs: runtime (the deployment's, no revision), build, filtered
  r = await cli(dir, "deploy", "logs", "--name", name);
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /started the agent server/);
  assert.match(r.out, /DEPLOYED: serving the deployment's URL/);
  r = await cli(dir, "deploy", "logs", "--name", name, "-q", "SERVING the deployment");
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /DEPLOYED: serving/);
  assert.doesNotMatch(r.out, /started the agent server/);
  r = await cli(dir, "deploy", "logs", "--name", name, "--level", "WARNING");
  assert.equal(r.code, 0, r.out);
  assert.doesNotMatch(r.out, /DEPLOYED: serving/);
  r = await cli(dir, "deploy", "logs", "--name", name, "--type", "build");
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /loading graphs/);
  r = await cli(dir, "deploy", "logs", "--name", name, "--type", "build", "-q", "langgraph.json");
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /graphs in langgraph\.json/);
  assert.doesNotMatch(r.out, /loading graphs/);

  // a broken project: the deploy fails, and its build log's error line is found by level
  const broken = copyProject(t, "broken");
  r = await cli(broken, "deploy", "--remote", "--name", `${name}-broken`, "--no-input");
  assert.notEqual(r.code, 0, r.out);
  assert.match(r.out, /BUILD_FAILED/);
  r = await cli(broken, "deploy", "logs", "--name", `${name}-broken`, "--type", "build", "--level", "ERROR");
  assert.equal(r.code, 0, r.out);
  assert.match(r.out, /BUILD_FAILED: graph broken failed to load/);
  assert.doesNotMatch(r.out, /loading graphs/);

  // delete
  r = await cli(dir, "deploy", "delete", id, "--force");
  assert.equal(r.code, 0, r.out);
  assert.equal((await p.api(`/v2/deployments/${id}`)).status, 404);
  r = await cli(dir, "deploy", "list");
  assert.ok(!r.out.includes(id), r.out);
}

// The two CLIs side by side, each against a platform of its own: most of each scenario is waiting
// (the CLIs' polls, the build command's sleep), so the file takes about as long as its slower CLI.
describe("the official deploy CLIs work unmodified against Wharf", { concurrency: 2 }, () => {
  test("npm @langchain/langgraph-cli: langgraphjs deploy, list, revisions list, logs (runtime, build, -q, --level), delete", async (t) => {
    await scenarios(t, "js", await jsCli());
  });
  test("PyPI langgraph-cli: langgraph deploy, list, revisions list, logs (runtime, build, -q, --level), delete", async (t) => {
    await scenarios(t, "py", await pyCli());
  });
});
