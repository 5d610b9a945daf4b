import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import pg from "pg";
import { deploymentDatabaseNames } from "../../src/deployments/runtime/database-access.ts";
import type { TestPlatform } from "../support/platform.ts";
import { isRoot, POSTGRES_URL, requireCapability } from "../support/requirements.ts";
import { copyProject, lastMessage, logsOf, pollRevision, runWait, startDeploymentsPlatform } from "./support.ts";

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
  const rev = await pollRevision(p, d.id, d.latest_revision_id, 90_000);
  assert.equal(
    rev.status,
    "DEPLOYED",
    `${rev.status_message}\n${await logsOf(p, d.id, rev.id, "build")}\n${await logsOf(p, d.id, rev.id, "deploy")}`,
  );
  return { id: d.id as string, url: d.source_config.custom_url as string, revisionId: rev.id };
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: POSTGRES_URL });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

const count = (c: pg.Client, text: string, values: unknown[] = []) =>
  c.query(text, values).then((r) => Number(r.rows[0].n));

describe("a deployment's own PostgreSQL schema and role", () => {
  test("threads land in the deployment's schema; its graph cannot read the platform's tables or another deployment's schema; delete drops both", async (t) => {
    if (!requireCapability(t, isRoot(), "confining deployments needs root (namespaces, cgroups)")) return;
    const p = await startDeploymentsPlatform(t, { dialect: "postgres", real: true, options: { isolation: true } });
    if (!p) return;

    // A victim with a thread: its rows and checkpoints are in its own schema, not the platform's.
    const victim = await deploy(p, "victim", copyProject(t, "echo"));
    const victimNames = deploymentDatabaseNames(victim.id);
    const headers = { "content-type": "application/json", "x-api-key": p.apiKey };
    const thread = (await (await fetch(`${victim.url}/threads`, { method: "POST", headers, body: "{}" })).json()) as {
      thread_id: string;
    };
    const run = await fetch(`${victim.url}/threads/${thread.thread_id}/runs/wait`, {
      method: "POST",
      headers,
      body: JSON.stringify({ assistant_id: "echo", input: { messages: [{ role: "human", content: "kept" }] } }),
    });
    assert.equal(run.status, 200, await run.clone().text());
    assert.equal(lastMessage((await run.json()) as Record<string, unknown>), "echo: kept");
    await admin(async (c) => {
      const schema = victimNames.schema;
      assert.equal(
        await count(c, `select count(*) as n from "${schema}".agent_threads where thread_id = $1`, [thread.thread_id]),
        1,
      );
      assert.ok(
        (await count(c, `select count(*) as n from "${schema}".checkpoints where thread_id = $1`, [thread.thread_id])) >
          0,
        "checkpoints in the deployment's schema",
      );
      assert.equal(
        await count(c, `select count(*) as n from "${p.pgSchema}".agent_threads`),
        0,
        "nothing in the platform's schema",
      );
      const owner = await c.query("select nspowner::regrole::text as o from pg_namespace where nspname = $1", [schema]);
      assert.equal(owner.rows[0].o, victimNames.role);
      const role = await c.query(
        "select rolsuper, rolcreaterole, rolcreatedb, rolcanlogin, rolreplication, rolbypassrls from pg_roles where rolname = $1",
        [victimNames.role],
      );
      assert.deepEqual(role.rows[0], {
        rolsuper: false,
        rolcreaterole: false,
        rolcreatedb: false,
        rolcanlogin: true,
        rolreplication: false,
        rolbypassrls: false,
      });
    });
    const row = await p.ctx.db
      .selectFrom("deployments")
      .select(["db_password_key_id", "db_password_ciphertext"])
      .where("id", "=", victim.id)
      .executeTakeFirstOrThrow();
    assert.ok(
      row.db_password_ciphertext && row.db_password_key_id,
      "the role's password is sealed in the deployments row",
    );

    // A hostile graph, with its own connection URL in hand, tries everything else.
    const dir = copyProject(t, "pg-probe");
    fs.writeFileSync(
      path.join(dir, "targets.json"),
      JSON.stringify({
        platformSchema: p.pgSchema,
        otherSchema: victimNames.schema,
        otherRole: victimNames.role,
        superuser: new URL(POSTGRES_URL).username || "postgres",
      }),
    );
    const hostile = await deploy(p, "hostile", dir);
    const probe = await runWait(hostile.url, p.apiKey, "go", "probe");
    assert.equal(probe.status, 200, JSON.stringify(probe.body));
    const results = JSON.parse(lastMessage(probe.body)) as Record<string, string>;
    assert.match(results.ownSchema, /^ALLOWED: /, JSON.stringify(results));
    assert.equal(results.ownSchema, `ALLOWED: ${JSON.stringify(deploymentDatabaseNames(hostile.id).schema)}`);
    for (const name of [
      "platformTable",
      "platformDeployments",
      "otherSchema",
      "otherCheckpoints",
      "createInPlatform",
      "createSchema",
      "setRoleSuperuser",
      "setRoleOther",
      "readServerFile",
      "createRole",
      "asSuperuser",
      "asOtherRole",
      "otherDatabase",
    ]) {
      assert.match(results[name] ?? "missing", /^denied: /, `${name} was not refused: ${JSON.stringify(results)}`);
    }
    // The role's privileges refuse the SQL (42501), the forwarder other identities (28000).
    assert.equal(results.platformTable, "denied: 42501");
    assert.equal(results.otherSchema, "denied: 42501");
    assert.equal(results.asSuperuser, "denied: 28000");

    // Deleting a deployment drops its schema and its role; the other's stay.
    const del = await p.api(`/v2/deployments/${hostile.id}`, { method: "DELETE" });
    assert.equal(del.status, 204);
    const hostileNames = deploymentDatabaseNames(hostile.id);
    await admin(async (c) => {
      assert.equal(
        await count(c, "select count(*) as n from pg_namespace where nspname = $1", [hostileNames.schema]),
        0,
      );
      assert.equal(await count(c, "select count(*) as n from pg_roles where rolname = $1", [hostileNames.role]), 0);
      assert.equal(await count(c, "select count(*) as n from pg_roles where rolname = $1", [victimNames.role]), 1);
    });
    assert.equal((await p.api(`/v2/deployments/${victim.id}`, { method: "DELETE" })).status, 204);
    await admin(async (c) =>
      assert.equal(
        await count(c, "select count(*) as n from pg_namespace where nspname = $1", [victimNames.schema]),
        0,
      ),
    );
  });
});
