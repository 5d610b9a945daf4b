import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import type { TestContext } from "node:test";
import { describe, test } from "node:test";
import { WHARF_ROOT } from "../../src/deployments/layout.ts";
import { startGitHttpServer } from "../support/git-http-server.ts";
import type { TestPlatform } from "../support/platform.ts";
import { logsOf, pollRevision, startDeploymentsPlatform } from "./support.ts";

const ECHO_AGENT = path.join(WHARF_ROOT, "examples/echo-agent");

function tempDir(t: TestContext, name: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `wharf-atk-${name}-`));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function post(
  p: TestPlatform,
  name: string,
  source: string,
  sourceConfig: Record<string, unknown>,
  revisionConfig: Record<string, unknown>,
) {
  return p.api("/v2/deployments", {
    method: "POST",
    json: {
      name,
      source,
      source_config: sourceConfig,
      source_revision_config: { langgraph_config_path: "langgraph.json", ...revisionConfig },
    },
  });
}

/** The 422's message at `loc` (asserting there is one). */
async function refusal(res: Response, loc: string[]): Promise<string> {
  const body = await res.json();
  assert.equal(res.status, 422, JSON.stringify(body));
  const issue = (body.detail as Array<{ loc: string[]; msg: string }>).find((d) => d.loc.join(".") === loc.join("."));
  assert.ok(issue, JSON.stringify(body));
  return issue.msg;
}

const LOCAL = ["body", "source_revision_config", "local_path"];
const REPO = ["body", "source_config", "repo_url"];

describe("deployment sources under attack", () => {
  test("local_path from the API: off unless WHARF_DEPLOY_LOCAL_ROOTS; host folders, /proc aliases, links out and the home are refused with one text", async (t) => {
    const root = tempDir(t, "root");
    const project = path.join(root, "project");
    fs.cpSync(ECHO_AGENT, project, { recursive: true });
    fs.symlinkSync("/etc", path.join(root, "etc-link"));

    const off = (await startDeploymentsPlatform(t, { env: { WHARF_DEPLOY_LOCAL_ROOTS: "" } }))!;
    for (const dir of ["/etc", project])
      assert.match(
        await refusal(await post(off, "x", "internal_source", {}, { local_path: dir }), LOCAL),
        /WHARF_DEPLOY_LOCAL_ROOTS/,
      );

    const p = (await startDeploymentsPlatform(t, { env: { WHARF_DEPLOY_LOCAL_ROOTS: root } }))!;
    const attempts = [
      "/etc",
      "/nonexistent-wharf-dir",
      `/proc/self/root${project}`,
      `/proc/self/root${p.home}`,
      `${root}/../../etc`,
      path.join(root, "etc-link"),
      path.join(root, "etc-link/ssl"),
      path.join(root, "absent"),
      p.home,
      "/dev",
      "relative/dir",
    ];
    const texts = new Set<string>();
    for (const dir of attempts)
      texts.add(await refusal(await post(p, "x", "internal_source", {}, { local_path: dir }), LOCAL));
    assert.equal(texts.size, 1, `one text whatever exists: ${[...texts].join(" | ")}`);
    assert.equal((await p.api("/v2/deployments")).status, 200);
  });

  test("local_path copies: a link leaving the folder fails the build, a FIFO is skipped, in-tree links are kept, nothing outside is read", async (t) => {
    const root = tempDir(t, "copy");
    const project = path.join(root, "project");
    fs.cpSync(ECHO_AGENT, project, { recursive: true });
    fs.symlinkSync("/etc", path.join(project, "escape"));
    const p = (await startDeploymentsPlatform(t, { env: { WHARF_DEPLOY_LOCAL_ROOTS: root } }))!;
    let res = await post(p, "links", "internal_source", {}, { local_path: project });
    assert.equal(res.status, 201, await res.clone().text());
    const d = await res.json();
    const failed = await pollRevision(p, d.id, d.latest_revision_id);
    assert.equal(failed.status, "BUILD_FAILED");
    assert.match(`${failed.status_message}\n${await logsOf(p, d.id, failed.id, "build")}`, /escape.*leaves/);
    assert.ok(!fs.existsSync(path.join(p.home, "deployments", "builds", failed.id, "escape", "shadow")));

    fs.rmSync(path.join(project, "escape"));
    execFileSync("mkfifo", [path.join(project, "pipe")]);
    fs.symlinkSync("langgraph.json", path.join(project, "config-link"));
    res = await p.api(`/v2/deployments/${d.id}`, {
      method: "PATCH",
      json: { source_revision_config: { local_path: project } },
    });
    assert.equal(res.status, 200, await res.clone().text());
    const rev = await pollRevision(p, d.id, (await res.json()).latest_revision_id);
    const log = await logsOf(p, d.id, rev.id, "build");
    assert.equal(rev.status, "DEPLOYED", `${rev.status_message}\n${log}`);
    assert.match(log, /skipped pipe \(not a regular file\)/);
    const build = path.join(p.home, "deployments", "builds", rev.id);
    assert.equal(fs.existsSync(path.join(build, "pipe")), false);
    assert.equal(fs.readlinkSync(path.join(build, "config-link")), "langgraph.json");
  });

  test("repo_url: local paths, file:// and other transports are refused; clones to loopback are refused by the egress policy unless the operator allows it, with one text for open and closed ports", async (t) => {
    const p = (await startDeploymentsPlatform(t))!;
    for (const url of [
      "/srv/some/repo.git",
      "file:///srv/some/repo.git",
      "ext::sh -c touch% /tmp/pwned",
      "ssh://git@127.0.0.1/x.git",
      "git://127.0.0.1/x.git",
      "-u/tmp",
      "https://",
    ]) {
      assert.match(await refusal(await post(p, "g", "github", { repo_url: url }, {}), REPO), /https:\/\//, url);
    }

    const root = tempDir(t, "git");
    execFileSync("git", ["init", "--quiet", "--bare", path.join(root, "agent.git")]);
    const served = await startGitHttpServer(t, root);
    const closed = net.createServer().listen(0, "127.0.0.1");
    await new Promise((r) => closed.once("listening", r));
    const closedPort = (closed.address() as net.AddressInfo).port;
    await new Promise((r) => closed.close(r));
    const messages: string[] = [];
    for (const [name, url] of [
      ["open", `${served.url}/agent.git`],
      ["closed", `http://127.0.0.1:${closedPort}/agent.git`],
    ]) {
      const res = await post(p, name, "github", { repo_url: url }, {});
      assert.equal(res.status, 201, await res.clone().text());
      const d = await res.json();
      const rev = await pollRevision(p, d.id, d.latest_revision_id);
      assert.equal(rev.status, "BUILD_FAILED");
      const log = await logsOf(p, d.id, rev.id, "build");
      assert.match(rev.status_message ?? "", /egress policy.*WHARF_EGRESS_ALLOW_INTERNAL/, log);
      messages.push(
        (rev.status_message ?? "").replace(String(served.port), "PORT").replace(String(closedPort), "PORT"),
      );
    }
    assert.equal(messages[0], messages[1], "open and closed ports read the same");

    // A server outside the allowed range redirecting to one inside it is refused too.
    const redirecting = await startGitHttpServer(t, root, { host: "127.0.0.2", redirectTo: served.url });
    const allowed = (await startDeploymentsPlatform(t, { env: { WHARF_EGRESS_ALLOW_INTERNAL: "127.0.0.2/32" } }))!;
    const res = await post(allowed, "redirected", "github", { repo_url: `${redirecting.url}/agent.git` }, {});
    const d = await res.json();
    const rev = await pollRevision(allowed, d.id, d.latest_revision_id);
    assert.equal(rev.status, "BUILD_FAILED");
    assert.match(rev.status_message ?? "", /egress policy/, await logsOf(allowed, d.id, rev.id, "build"));
  });
});
