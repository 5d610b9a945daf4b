import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import { describe, test } from "node:test";
import { keyringPath } from "../../src/crypto/keyring.ts";
import { openApiKey, openSecrets, sealSecrets, apiKeyAad } from "../../src/deployments/store/deployment-secrets.ts";
import { agentKeyAad } from "../../src/deployments/runtime/revision-runtime.ts";
import { dbPasswordAad } from "../../src/deployments/runtime/database-access.ts";
import { workspaceCa } from "../../src/egress/index.ts";
import { openValues, sealValue } from "../../src/egress/index.ts";
import { openEnv, sealEnv, getSandbox } from "../../src/sandboxes/store/sandbox-store.ts";
import { keyringFromEnv } from "../../src/crypto/keyring.ts";
import { SecretBox } from "../../src/crypto/secret-box.ts";
import { rotateMasterKey } from "../../src/secrets/key-rotation.ts";
import { scanKeyUsage } from "../../src/secrets/rotate-master-key.ts";
import { aadOf, SEALED_LOCATIONS } from "../../src/secrets/sealed-columns.ts";
import { readSecretValues } from "../../src/secrets/secret-store.ts";
import { nowIso } from "../../src/store/database.ts";
import { newId } from "../../src/store/ids.ts";
import { Browser } from "../connections/support/browser.ts";
import { startMockAuthServer } from "../connections/support/mock-oauth.ts";
import { json, startConnectionsPlatform } from "../connections/support/platform.ts";
import { AGENT_A } from "../connections/support/seed.ts";
import { DIALECTS } from "../support/dialects.ts";
import type { TestPlatform } from "../support/platform.ts";
import { wharfCli } from "../support/process.ts";

const loc = (name: string) => SEALED_LOCATIONS.find((l) => l.name === name)!;

/** `wharf secrets rotate-key` as a separate process against the running platform's storage. */
async function rotate(p: TestPlatform): Promise<string> {
  const env: Record<string, string> = {
    WHARF_HOME: p.home,
    DATABASE_URL: p.databaseUrl ? `${p.databaseUrl}?options=-c%20search_path%3D${p.pgSchema}` : "",
  };
  const { code, out } = await wharfCli(["secrets", "rotate-key"], { env });
  assert.equal(code, 0, out);
  return out;
}

/** Rows that only the agent server writes, planted with the registry's associated data. */
async function plantAgentServerRows(p: TestPlatform) {
  const now = nowIso();
  const cron = { server_id: "srv-1", cron_id: newId() };
  const cronSealed = p.ctx.box.seal('{"identity":"cron-user"}', aadOf(loc("agent-server.cron-auth"), cron));
  await (p.ctx.db as any)
    .insertInto("agent_crons")
    .values({
      ...cron,
      assistant_id: "a",
      thread_id: null,
      user_id: null,
      schedule: "* * * * *",
      payload: "{}",
      metadata: "{}",
      on_run_completed: "delete",
      enabled: 1,
      end_time: null,
      next_run_date: null,
      auth_key_id: cronSealed.keyId,
      auth_sealed: cronSealed.blob,
      created_at: now,
      updated_at: now,
    })
    .execute();
  const run = { server_id: "srv-1", run_id: newId() };
  const priv = p.ctx.box.seal('{"configurable":{"x":"run-private"}}', aadOf(loc("agent-server.run-private"), run));
  await (p.ctx.db as any)
    .insertInto("agent_runs")
    .values({
      ...run,
      thread_id: newId(),
      assistant_id: "a",
      status: "pending",
      metadata: "{}",
      kwargs: JSON.stringify({ config: {}, sealed_private: priv }),
      multitask_strategy: "reject",
      temporary: 0,
      worker_id: null,
      lease_until: null,
      created_at: now,
      updated_at: now,
    })
    .execute();
  return async () => {
    const c = await (p.ctx.db as any)
      .selectFrom("agent_crons")
      .selectAll()
      .where("cron_id", "=", cron.cron_id)
      .executeTakeFirstOrThrow();
    assert.equal(
      p.ctx.box.open({ keyId: c.auth_key_id, blob: c.auth_sealed }, aadOf(loc("agent-server.cron-auth"), c)),
      '{"identity":"cron-user"}',
    );
    const r = await (p.ctx.db as any)
      .selectFrom("agent_runs")
      .selectAll()
      .where("run_id", "=", run.run_id)
      .executeTakeFirstOrThrow();
    assert.match(
      p.ctx.box.open(JSON.parse(r.kwargs).sealed_private, aadOf(loc("agent-server.run-private"), r)),
      /run-private/,
    );
  };
}

async function plantDeploymentAndSandbox(p: TestPlatform) {
  const ws = p.bootstrap.workspaceId;
  const now = nowIso();
  const deploymentId = newId();
  const key = p.ctx.box.seal("deployment-api-key-value", apiKeyAad(ws, deploymentId));
  const agentKey = p.ctx.box.seal("deployment-agent-key-value", agentKeyAad(ws, deploymentId));
  const dbPassword = p.ctx.box.seal("deployment-db-password-value", dbPasswordAad(ws, deploymentId));
  await (p.ctx.db as any)
    .insertInto("deployments")
    .values({
      id: deploymentId,
      workspace_id: ws,
      name: "rot",
      source: "internal_source",
      source_config: "{}",
      source_revision_config: "{}",
      ...sealSecrets(p.ctx.box, ws, deploymentId, [{ name: "DEP", value: "deployment-secret-value" }]),
      api_key_id: "k",
      api_key_key_id: key.keyId,
      api_key_ciphertext: key.blob,
      agent_key_key_id: agentKey.keyId,
      agent_key_ciphertext: agentKey.blob,
      db_password_key_id: dbPassword.keyId,
      db_password_ciphertext: dbPassword.blob,
      status: "READY",
      created_at: now,
      updated_at: now,
    })
    .execute();
  const sandboxId = newId();
  await (p.ctx.db as any)
    .insertInto("sandboxes")
    .values({
      id: sandboxId,
      workspace_id: ws,
      name: "rot",
      status: "stopped",
      status_changed_at: now,
      vcpus: 1,
      cpu_millicores: 1000,
      mem_bytes: 1 << 28,
      fs_capacity_bytes: 1 << 28,
      idle_ttl_seconds: 0,
      delete_after_stop_seconds: 0,
      labels: "{}",
      ...sealEnv(p.ctx.box, ws, sandboxId, { SANDBOX_ENV: "sandbox-env-value" }),
      created_at: now,
      created_by: p.bootstrap.userId,
      updated_at: now,
      updated_by: p.bootstrap.userId,
    })
    .execute();
  // Image registries of sandboxes, where this build has them.
  const registry = SEALED_LOCATIONS.find((l) => l.name === "sandboxes.registry-password");
  const registryRow = { workspace_id: ws, id: newId() };
  if (registry) {
    const pw = p.ctx.box.seal("registry-password-value", aadOf(registry, registryRow));
    await (p.ctx.db as any)
      .insertInto("sandbox_registries")
      .values({
        ...registryRow,
        name: "rot",
        url: "https://registry.example.test",
        username: "u",
        password_key_id: pw.keyId,
        password_cipher: pw.blob,
        created_at: now,
        created_by: p.bootstrap.userId,
        updated_at: now,
        updated_by: p.bootstrap.userId,
      })
      .execute();
  }
  return async () => {
    if (registry) {
      const r = await (p.ctx.db as any)
        .selectFrom("sandbox_registries")
        .selectAll()
        .where("id", "=", registryRow.id)
        .executeTakeFirstOrThrow();
      assert.equal(
        p.ctx.box.open({ keyId: r.password_key_id, blob: r.password_cipher }, aadOf(registry, r)),
        "registry-password-value",
      );
    }
    const d = await (p.ctx.db as any)
      .selectFrom("deployments")
      .selectAll()
      .where("id", "=", deploymentId)
      .executeTakeFirstOrThrow();
    assert.deepEqual(openSecrets(p.ctx.box, d), [{ name: "DEP", value: "deployment-secret-value" }]);
    assert.equal(openApiKey(p.ctx.box, d), "deployment-api-key-value");
    assert.equal(
      p.ctx.box.open({ keyId: d.agent_key_key_id, blob: d.agent_key_ciphertext }, agentKeyAad(ws, deploymentId)),
      "deployment-agent-key-value",
    );
    assert.equal(
      p.ctx.box.open({ keyId: d.db_password_key_id, blob: d.db_password_ciphertext }, dbPasswordAad(ws, deploymentId)),
      "deployment-db-password-value",
    );
    assert.deepEqual(openEnv(p.ctx.box, (await getSandbox(p.ctx.db, sandboxId))!), {
      SANDBOX_ENV: "sandbox-env-value",
    });
  };
}

for (const dialect of DIALECTS) {
  describe(`master-key rotation with the server running (${dialect})`, () => {
    test("one value of every kind survives two rotations and still works; old keys go once unused", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      const ws = p.bootstrap.workspaceId;
      const mock = await startMockAuthServer(t);

      // Workspace secret, through the API.
      assert.equal(
        (await p.api("/v2/secrets", { method: "PUT", json: [{ key: "WS_SECRET", value: "workspace-secret-value" }] }))
          .status,
        200,
      );
      // Egress: an opaque header value and the workspace CA key.
      const opaqueId = await sealValue(p.ctx, ws, "opaque-header-value");
      const ca = await workspaceCa(p.ctx.db, p.ctx.box, ws);
      // Connections: a provider with a client secret, a completed flow (access + refresh), a pending flow.
      assert.equal(
        (
          await p.api("/v2/auth/providers", {
            method: "POST",
            json: mock.providerBody("mock", { client_secret: "client-secret-value" }),
          })
        ).status,
        200,
      );
      mock.service.once("beforeResponse", (r: { body: Record<string, unknown> }) =>
        Object.assign(r.body, { access_token: "access-1", refresh_token: "refresh-1", expires_in: 3600 }),
      );
      const started = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A },
        }),
      );
      await new Browser().open(started.url);
      const waited = await json(p.api(`/v2/auth/wait/${started.auth_id}?timeout=5`));
      assert.equal(waited.token, "access-1");
      const pending = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["b"], agent_id: AGENT_A },
        }),
      );
      assert.ok(pending.url, "a second flow stays pending");
      // Deployments, sandboxes and the agent server.
      const checkDeploymentAndSandbox = await plantDeploymentAndSandbox(p);
      const checkAgentServer = await plantAgentServerRows(p);

      const planted = await scanKeyUsage(p.ctx.db);
      const firstKey = [...planted.keys()][0];
      const locationsPlanted = new Set(planted.get(firstKey)!.map((u) => u.location));
      for (const l of SEALED_LOCATIONS) assert.ok(locationsPlanted.has(l.name), `the test plants a value in ${l.name}`);

      const out1 = await rotate(p);
      assert.match(out1, /re-encrypted (\d+) value/);
      assert.ok(Number(/re-encrypted (\d+)/.exec(out1)![1]) >= SEALED_LOCATIONS.length, out1);
      // A write by the running server between rotations lands under the new key.
      await p.api("/v2/secrets", { method: "PUT", json: [{ key: "BETWEEN", value: "between-value" }] });
      const out2 = await rotate(p);
      assert.match(out2, /dropped unused key/, out2);

      const ring = JSON.parse(fs.readFileSync(keyringPath(p.home), "utf8"));
      assert.deepEqual(Object.keys(ring.keys), [ring.active], "only the active key is left");
      const usage = await scanKeyUsage(p.ctx.db);
      assert.deepEqual([...usage.keys()], [ring.active], "every row is under the active key");
      assert.equal(usage.get(ring.active)!.length >= SEALED_LOCATIONS.length, true);

      // Read each back through its use, with the server that started before both rotations.
      const secrets = await readSecretValues(p.ctx.db, p.ctx.box, ws, ["WS_SECRET", "BETWEEN"]);
      assert.deepEqual(Object.fromEntries(secrets), { WS_SECRET: "workspace-secret-value", BETWEEN: "between-value" });
      assert.equal((await openValues(p.ctx, ws, [opaqueId])).get(opaqueId), "opaque-header-value");
      assert.equal((await workspaceCa(p.ctx.db, p.ctx.box, ws)).keyPem, ca.keyPem);
      await checkDeploymentAndSandbox();
      await checkAgentServer();
      // The connection still refreshes: the provider receives the planted refresh token and client secret.
      await p.ctx.db
        .updateTable("oauth_tokens")
        .set({ expires_at: new Date(Date.now() + 5000).toISOString() })
        .where("id", "=", waited.metadata.token_id)
        .execute();
      mock.service.once("beforeResponse", (r: { body: Record<string, unknown> }) =>
        Object.assign(r.body, { access_token: "access-2", refresh_token: "refresh-2", expires_in: 3600 }),
      );
      const refreshed = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A },
        }),
      );
      assert.equal(refreshed.token, "access-2");
      const refreshRequest = mock.refreshRequests().at(-1)!;
      assert.equal(refreshRequest.refresh_token, "refresh-1");
      assert.equal(refreshRequest.client_secret, "client-secret-value");
      // The pending flow is still served: asking again hands back the same sealed authorize URL.
      const again = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["b"], agent_id: AGENT_A },
        }),
      );
      assert.equal(again.url, pending.url);
    });

    test("a key some row still needs is kept and the row is named", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      await p.api("/v2/secrets", { method: "PUT", json: [{ key: "OK", value: "v" }] });
      // A value that no longer opens (tampered) pins its key.
      await p.api("/v2/secrets", { method: "PUT", json: [{ key: "BROKEN", value: "v" }] });
      const row = await p.ctx.db
        .selectFrom("secrets")
        .select(["ciphertext", "key_id"])
        .where("key", "=", "BROKEN")
        .executeTakeFirstOrThrow();
      const raw = Buffer.from(row.ciphertext, "base64");
      raw[raw.length - 1] ^= 1;
      await p.ctx.db
        .updateTable("secrets")
        .set({ ciphertext: raw.toString("base64") })
        .where("key", "=", "BROKEN")
        .execute();
      const env = {
        WHARF_HOME: p.home,
        DATABASE_URL: p.databaseUrl ? `${p.databaseUrl}?options=-c%20search_path%3D${p.pgSchema}` : "",
      };
      const { code, out } = await wharfCli(["secrets", "rotate-key"], { env });
      assert.equal(code, 1, out);
      assert.match(out, /cannot re-encrypt secrets\.value \(workspace_id=[^,]+,key=BROKEN\)/);
      assert.match(
        out,
        new RegExp(`key ${row.key_id} is still used by: secrets\\.value \\(workspace_id=[^,]+,key=BROKEN\\)`),
      );
      const ring = JSON.parse(fs.readFileSync(keyringPath(p.home), "utf8"));
      assert.ok(ring.keys[row.key_id], "the old key stays");
      assert.notEqual(ring.active, row.key_id);
      assert.deepEqual(
        Object.fromEntries(await readSecretValues(p.ctx.db, p.ctx.box, p.bootstrap.workspaceId, ["OK"])),
        { OK: "v" },
      );
    });
  });
}

describe("master-key rotation with keys from WHARF_MASTER_KEY", () => {
  test("re-encrypts under the first key; says when the old one may leave the variable", async (t) => {
    const a = crypto.randomBytes(32).toString("base64");
    const b = crypto.randomBytes(32).toString("base64");
    const p = await startConnectionsPlatform(t, "sqlite");
    if (!p) return;
    const box = new SecretBox(keyringFromEnv(a));
    const sealed = box.seal("env-keyed", "workspace-secret:" + p.bootstrap.workspaceId + ":ENVKEY");
    const now = nowIso();
    await p.ctx.db
      .insertInto("secrets")
      .values({
        workspace_id: p.bootstrap.workspaceId,
        key: "ENVKEY",
        key_id: sealed.keyId,
        ciphertext: sealed.blob,
        created_at: now,
        updated_at: now,
      })
      .execute();
    const lines: string[] = [];
    const result = await rotateMasterKey(p.ctx.db, { home: p.home, masterKey: `${b},${a}`, say: (l) => lines.push(l) });
    assert.equal(result.activeKeyId, keyringFromEnv(b).activeId);
    assert.deepEqual([...result.kept.keys()], []);
    assert.deepEqual(result.dropped, [], "keys from the environment are never dropped by the command");
    assert.ok(
      lines.some((l) => /WHARF_MASTER_KEY may now list the active key alone/.test(l)),
      lines.join("\n"),
    );
    const row = await p.ctx.db.selectFrom("secrets").selectAll().where("key", "=", "ENVKEY").executeTakeFirstOrThrow();
    assert.equal(
      new SecretBox(keyringFromEnv(b)).open(
        { keyId: row.key_id, blob: row.ciphertext },
        "workspace-secret:" + p.bootstrap.workspaceId + ":ENVKEY",
      ),
      "env-keyed",
    );
  });
});
