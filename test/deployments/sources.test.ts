import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestContext } from "node:test";
import { describe, test } from "node:test";
import { WHARF_ROOT } from "../../src/deployments/layout.ts";
import { startGitHttpServer } from "../support/git-http-server.ts";
import type { TestPlatform } from "../support/platform.ts";
import { lastMessage, logsOf, pollRevision, runWait, startDeploymentsPlatform } from "./support.ts";

const ECHO_AGENT = path.join(WHARF_ROOT, "examples/echo-agent");

function tempDir(t: TestContext, name: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `wharf-src-${name}-`));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

function git(cwd: string, ...args: string[]): string {
  const env = {
    ...process.env,
    GIT_CONFIG_NOSYSTEM: "1",
    GIT_AUTHOR_NAME: "t",
    GIT_AUTHOR_EMAIL: "t@example.test",
    GIT_COMMITTER_NAME: "t",
    GIT_COMMITTER_EMAIL: "t@example.test",
  };
  return execFileSync("git", ["-c", "init.defaultBranch=main", "-c", "commit.gpgsign=false", ...args], {
    cwd,
    env,
    encoding: "utf8",
    stdio: ["ignore", "pipe", "pipe"],
  }).trim();
}

async function create(
  p: TestPlatform,
  name: string,
  sourceConfig: Record<string, unknown>,
  revisionConfig: Record<string, unknown>,
) {
  const res = await p.api("/v2/deployments", {
    method: "POST",
    json: {
      name,
      source: "internal_source",
      source_config: sourceConfig,
      source_revision_config: { langgraph_config_path: "langgraph.json", ...revisionConfig },
    },
  });
  assert.equal(res.status, 201, await res.clone().text());
  const d = await res.json();
  return { id: d.id as string, url: d.source_config.custom_url as string, revisionId: d.latest_revision_id as string };
}

async function patchRevision(p: TestPlatform, id: string, revisionConfig: Record<string, unknown>): Promise<string> {
  const res = await p.api(`/v2/deployments/${id}`, {
    method: "PATCH",
    json: { source_revision_config: revisionConfig },
  });
  assert.equal(res.status, 200, await res.clone().text());
  return (await res.json()).latest_revision_id as string;
}

async function expectDeployed(p: TestPlatform, id: string, revisionId: string) {
  const rev = await pollRevision(p, id, revisionId);
  assert.equal(
    rev.status,
    "DEPLOYED",
    `${rev.status_message}\n${await logsOf(p, id, rev.id, "build")}\n${await logsOf(p, id, rev.id, "deploy")}`,
  );
  return rev;
}

describe("deployment sources", () => {
  test("git over HTTP: a branch, then a tag; an unknown ref is BUILD_FAILED naming it", async (t) => {
    const root = tempDir(t, "git");
    const bare = path.join(root, "agent.git");
    const work = path.join(root, "work");
    git(root, "init", "--quiet", "--bare", bare);
    git(root, "clone", "--quiet", bare, work);
    fs.cpSync(ECHO_AGENT, work, { recursive: true });
    git(work, "checkout", "--quiet", "-b", "release");
    git(work, "add", ".");
    git(work, "commit", "--quiet", "-m", "first");
    const tagged = git(work, "rev-parse", "HEAD");
    git(work, "tag", "v1");
    // The branch moves on past the tag, so branch and tag name different commits.
    fs.writeFileSync(path.join(work, "NOTES.md"), "second commit\n");
    git(work, "add", ".");
    git(work, "commit", "--quiet", "-m", "second");
    const head = git(work, "rev-parse", "HEAD");
    git(work, "push", "--quiet", "origin", "release", "v1");
    assert.notEqual(head, tagged);

    const served = await startGitHttpServer(t, root);
    // The server is on loopback: clones reach it only because the operator allows that range.
    const p = (await startDeploymentsPlatform(t, { env: { WHARF_EGRESS_ALLOW_INTERNAL: "127.0.0.0/8" } }))!;
    const d = await create(p, "from-git", { repo_url: `${served.url}/agent.git` }, { repo_ref: "release" });
    const first = await expectDeployed(p, d.id, d.revisionId);
    assert.equal(first.source_revision_config.repo_commit_sha, head);
    assert.match(await logsOf(p, d.id, first.id, "build"), new RegExp(`checked out commit ${head}`));
    const run = await runWait(d.url, p.apiKey, "from git");
    assert.equal(run.status, 200);
    assert.equal(lastMessage(run.body), "echo: from git");

    const byTag = await patchRevision(p, d.id, { repo_ref: "v1" });
    assert.notEqual(byTag, d.revisionId);
    const second = await expectDeployed(p, d.id, byTag);
    assert.equal(second.source_revision_config.repo_commit_sha, tagged);
    assert.equal(second.source_revision_config.repo_ref, "v1");

    const missing = await patchRevision(p, d.id, { repo_ref: "no-such-ref" });
    const failed = await pollRevision(p, d.id, missing);
    assert.equal(failed.status, "BUILD_FAILED", failed.status_message ?? "");
    const log = await logsOf(p, d.id, missing, "build");
    assert.ok(
      log.split("\n").some((l) => l.includes("no-such-ref")),
      log,
    );
    // The tagged revision keeps serving.
    const res = await p.api(`/v2/deployments/${d.id}`);
    assert.equal((await res.json()).active_revision_id, byTag);
    assert.equal((await runWait(d.url, p.apiKey, "still")).status, 200);
  });

  test("npm: a package.json with a local file: dependency installs once, the next revision reuses the cache", async (t) => {
    const root = tempDir(t, "npm");
    const project = path.join(root, "project");
    fs.cpSync(ECHO_AGENT, project, { recursive: true });
    // Inside the project: a build sees nothing of the platform's machine beyond itself.
    const tiny = path.join(project, "vendor", "tiny-prefix");
    fs.mkdirSync(tiny, { recursive: true });
    fs.writeFileSync(
      path.join(tiny, "package.json"),
      JSON.stringify({ name: "tiny-prefix", version: "1.0.0", type: "module", main: "index.js" }),
    );
    fs.writeFileSync(path.join(tiny, "index.js"), 'export const prefix = "tiny";\n');
    // The graph answers through the dependency, so a broken link fails the build's graph load.
    const graphFile = path.join(project, "src/echo.ts");
    fs.writeFileSync(
      graphFile,
      `import { prefix } from "tiny-prefix";\n${fs.readFileSync(graphFile, "utf8").replace("`echo: ", "`${prefix}: ")}`,
    );
    fs.writeFileSync(
      path.join(project, "package.json"),
      JSON.stringify(
        {
          name: "project",
          private: true,
          type: "module",
          dependencies: { "tiny-prefix": "file:./vendor/tiny-prefix" },
        },
        null,
        2,
      ),
    );

    const p = (await startDeploymentsPlatform(t))!;
    const d = await create(p, "with-deps", {}, { local_path: project });
    await expectDeployed(p, d.id, d.revisionId);
    const firstLog = await logsOf(p, d.id, d.revisionId, "build");
    assert.match(firstLog, /^npm install /m);
    const installed = /dependencies installed and cached as ([0-9a-f]+)/.exec(firstLog);
    assert.ok(installed, firstLog);
    const depsRoot = path.join(p.home, "deployments", "deps", p.bootstrap.workspaceId);
    const cacheDir = path.join(depsRoot, installed[1]);
    const marker = path.join(cacheDir, ".complete");
    const before = fs.statSync(marker).mtimeMs;
    assert.equal(lastMessage((await runWait(d.url, p.apiKey, "hi")).body), "tiny: hi");

    // A source change with the same package.json: a new build, but no second install.
    fs.writeFileSync(path.join(project, "NOTES.md"), "changed\n");
    const next = await patchRevision(p, d.id, { local_path: project, langgraph_config_path: "langgraph.json" });
    await expectDeployed(p, d.id, next);
    const secondLog = await logsOf(p, d.id, next, "build");
    assert.match(secondLog, new RegExp(`dependencies ${installed[1]} are cached: reusing them`));
    assert.doesNotMatch(secondLog, /^npm (install|ci) /m);
    assert.equal(fs.statSync(marker).mtimeMs, before);
    assert.deepEqual(fs.readdirSync(depsRoot), [installed[1]]);
    assert.equal(lastMessage((await runWait(d.url, p.apiKey, "again")).body), "tiny: again");
  });
});

test("tarball uploads stream to disk: past WHARF_BODY_LIMIT_BYTES is fine, past WHARF_UPLOAD_LIMIT_BYTES is 413", async (t) => {
  const p = await startDeploymentsPlatform(t, {
    env: { WHARF_BODY_LIMIT_BYTES: "1024", WHARF_UPLOAD_LIMIT_BYTES: "65536" },
  });
  if (!p) return;
  const put = async (bytes: number) => {
    const { upload_url } = await (await p.api("/v2/deployments/upload-url", { method: "POST" })).json();
    return fetch(upload_url, { method: "PUT", body: new Uint8Array(bytes) });
  };
  let res = await put(32 * 1024);
  assert.equal(res.status, 200, await res.clone().text());
  assert.equal((await res.json()).size, 32 * 1024);
  res = await put(128 * 1024);
  assert.equal(res.status, 413);
  assert.match((await res.json()).detail, /WHARF_UPLOAD_LIMIT_BYTES/);
  // The JSON API keeps its own limit.
  res = await p.api("/v2/secrets", { method: "PUT", json: { key: "BIG", value: "x".repeat(4096) } });
  assert.equal(res.status, 413);
});
