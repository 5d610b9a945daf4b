import assert from "node:assert/strict";
import { test } from "node:test";
import { planPatch, type DeploymentPatch } from "../../src/deployments/rollout/patch-plan.ts";

const row = {
  source: "internal_source",
  source_config: JSON.stringify({
    repo_url: null,
    install_command: "npm ci",
    build_command: null,
    resource_spec: null,
  }),
  source_revision_config: JSON.stringify({
    source_tarball_path: "uploads/a.tgz",
    local_path: null,
    langgraph_config_path: null,
  }),
  active_revision_id: "rev-active",
  latest_revision_id: "rev-latest",
};

test("PATCH plan: which bodies make a revision, and whether it builds or deploys the current build again", () => {
  const cases: Array<
    [
      string,
      DeploymentPatch,
      boolean,
      { newRevision: boolean; reuse: string | null; sourceChanged?: boolean; commandsChanged?: boolean },
    ]
  > = [
    ["an empty body", {}, false, { newRevision: false, reuse: null }],
    ["a name-only style body (no revision fields)", { source_config: {} }, false, { newRevision: false, reuse: null }],
    [
      "a new tarball",
      { source_revision_config: { source_tarball_path: "uploads/b.tgz" } },
      false,
      { newRevision: true, reuse: null, sourceChanged: true },
    ],
    [
      "a revision field sent as null is unchanged",
      { source_revision_config: { source_tarball_path: null } },
      false,
      { newRevision: false, reuse: null },
    ],
    [
      "a changed install command builds",
      { source_config: { install_command: "npm install" } },
      false,
      { newRevision: true, reuse: null, commandsChanged: true },
    ],
    [
      "the same install command again",
      { source_config: { install_command: "npm ci" } },
      false,
      { newRevision: false, reuse: null },
    ],
    [
      "clearing the install command builds",
      { source_config: { install_command: null } },
      false,
      { newRevision: true, reuse: null, commandsChanged: true },
    ],
    [
      "clearing an absent build command",
      { source_config: { build_command: null } },
      false,
      { newRevision: false, reuse: null },
    ],
    ["secrets only: the current build again", {}, true, { newRevision: true, reuse: "rev-active" }],
    [
      "resources only: the current build again",
      { source_config: { resource_spec: { cpu: 2 } } },
      false,
      { newRevision: true, reuse: "rev-active" },
    ],
    [
      "secrets and a new source: a build",
      { source_revision_config: { repo_ref: "main" } },
      true,
      { newRevision: true, reuse: null, sourceChanged: true },
    ],
    ["another revision_source", { revision_source: "github" }, false, { newRevision: true, reuse: "rev-active" }],
    ["the same revision_source", { revision_source: "internal_source" }, false, { newRevision: false, reuse: null }],
    [
      "custom_url is never copied or counted",
      { source_config: { custom_url: "https://x" } },
      false,
      { newRevision: false, reuse: null },
    ],
  ];
  for (const [name, body, secretsChanged, want] of cases) {
    const p = planPatch(row, body, secretsChanged);
    assert.equal(p.newRevision, want.newRevision, `${name}: newRevision`);
    assert.equal(p.reuseBuildOf, want.reuse, `${name}: reuse`);
    assert.equal(p.sourceChanged, want.sourceChanged ?? false, `${name}: sourceChanged`);
    assert.equal(p.commandsChanged, want.commandsChanged ?? false, `${name}: commandsChanged`);
    assert.equal("custom_url" in p.nextSource, false, `${name}: custom_url`);
  }
});

test("PATCH plan: the merged configs and what the revision is built from", () => {
  const p = planPatch(
    row,
    {
      revision_source: "github",
      source_config: { install_command: null, build_command: "npm run build", repo_url: null },
      source_revision_config: { local_path: "/srv/app" },
    },
    false,
  );
  assert.deepEqual(
    p.nextSource,
    { repo_url: null, install_command: null, build_command: "npm run build", resource_spec: null },
    "null keeps a field but clears a command",
  );
  assert.deepEqual(
    p.merged,
    { source_tarball_path: null, local_path: "/srv/app", langgraph_config_path: null },
    "a local path replaces the tarball",
  );
  assert.deepEqual(p.revision, {
    source: "github",
    sourceRevisionConfig: p.merged,
    buildConfig: { repo_url: null, install_command: null, build_command: "npm run build" },
  });
  const noActive = planPatch({ ...row, active_revision_id: null }, {}, true);
  assert.equal(noActive.reuseBuildOf, "rev-latest", "no active revision: the latest's build");
});
