import assert from "node:assert/strict";
import path from "node:path";
import { describe, test } from "node:test";
import { REPO_ROOT, wharfCli } from "../support/process.ts";
import { copyProject, runWait, startDeploymentsPlatform } from "./support.ts";

describe("wharf deploy (CI/CD from the command line)", () => {
  test("uploads, shows each status, prints the URL; a broken project exits 1 with the log's tail; rollback, rm", async (t) => {
    const p = (await startDeploymentsPlatform(t, { real: true }))!;
    const env = { WHARF_URL: p.url, WHARF_API_KEY: p.apiKey };
    let r = await wharfCli(
      ["deploy", path.join(REPO_ROOT, "examples/echo-agent"), "--name", "demo", "--secret", "GREETING=hi"],
      { env },
    );
    assert.equal(r.code, 0, r.out);
    for (const s of [
      "Uploading the source",
      "Creating the deployment",
      "BUILDING",
      "DEPLOYING",
      "DEPLOYED",
      "Deployment successful",
    ])
      assert.ok(r.out.includes(s), `${s} missing in:\n${r.out}`);
    const url = /URL: (\S+)/.exec(r.out)![1];
    assert.equal((await runWait(url, p.apiKey, "from ci", "echo")).status, 200);

    r = await wharfCli(["deploy", copyProject(t, "broken"), "--name", "demo"], { env });
    assert.equal(r.code, 1, r.out);
    assert.match(r.out, /Deployment failed: BUILD_FAILED: graph broken failed to load/);
    assert.match(r.out, /last lines of the build log[\s\S]*wharf-fixture-package-that-does-not-exist/);
    assert.equal((await runWait(url, p.apiKey, "still", "echo")).status, 200, "the previous revision keeps serving");

    const live = (await (await p.api("/v2/deployments?name_contains=demo")).json()).resources[0].active_revision_id;
    r = await wharfCli(["deployments", "rollback", "demo", live], { env });
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /DEPLOYED/);
    r = await wharfCli(["deployments", "rm", "demo"], { env });
    assert.equal(r.code, 0, r.out);
    assert.equal((await fetch(`${url}/ok`)).status, 404);
  });
});
