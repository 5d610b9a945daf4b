import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DIALECTS } from "../support/dialects.ts";
import { startTestPlatform } from "../support/platform.ts";

for (const dialect of DIALECTS) {
  describe(`identity (${dialect})`, () => {
    test("API keys: shown once, stored hashed, listed without the key, revocable", async (t) => {
      const p = await startTestPlatform(t, { dialect });
      if (!p) return;
      let res = await p.api("/v2/api-keys", { method: "POST", json: { name: "ci" } });
      assert.equal(res.status, 201);
      const created = await res.json();
      assert.match(created.key, /^wharf_/);
      res = await p.api("/v2/api-keys");
      const list = await res.json();
      assert.equal(list.length, 2);
      assert.ok(list.every((k: Record<string, unknown>) => !("key" in k) && !("key_hash" in k)));
      assert.ok(!JSON.stringify(list).includes(created.key));

      res = await fetch(p.url + "/v2/secrets", { headers: { "x-api-key": created.key } });
      assert.equal(res.status, 200);
      res = await p.api(`/v2/api-keys/${created.id}`, { method: "DELETE" });
      assert.equal(res.status, 200);
      assert.ok((await res.json()).revoked_at);
      res = await fetch(p.url + "/v2/secrets", { headers: { "x-api-key": created.key } });
      assert.equal(res.status, 401);

      const rows = await p.ctx.db.selectFrom("api_keys").select(["key_hash", "prefix"]).execute();
      assert.ok(rows.every((r) => r.key_hash !== created.key && !r.key_hash.includes(created.key.slice(6))));
    });

    test("bearer tokens: issued for the user, accepted, rejected when tampered or expired", async (t) => {
      const p = await startTestPlatform(t, { dialect });
      if (!p) return;
      let res = await p.api("/v2/tokens", { method: "POST" });
      assert.equal(res.status, 201);
      const { access_token } = await res.json();
      res = await fetch(p.url + "/v2/me", { headers: { authorization: `Bearer ${access_token}` } });
      assert.equal(res.status, 200);
      const me = await res.json();
      assert.equal(me.scheme, "bearer");
      assert.equal(me.workspace_id, p.bootstrap.workspaceId);

      const tampered = access_token.slice(0, -3) + (access_token.endsWith("AAA") ? "BBB" : "AAA");
      res = await fetch(p.url + "/v2/me", { headers: { authorization: `Bearer ${tampered}` } });
      assert.equal(res.status, 401);

      const { issueBearerToken } = await import("../../src/identity/bearer-tokens.ts");
      const { token } = await issueBearerToken(
        p.ctx.box,
        { userId: p.bootstrap.userId, workspaceId: p.bootstrap.workspaceId },
        -10,
      );
      res = await fetch(p.url + "/v2/me", { headers: { authorization: `Bearer ${token}` } });
      assert.equal(res.status, 401);
      assert.match((await res.json()).detail, /expired/);
    });

    test("workspaces: X-Tenant-Id selects a workspace the user belongs to; rows never cross", async (t) => {
      const p = await startTestPlatform(t, { dialect });
      if (!p) return;
      let res = await p.api("/v2/workspaces", { method: "POST", json: { name: "team-b" } });
      assert.equal(res.status, 201);
      const b = await res.json();
      await p.api("/v2/secrets", { method: "PUT", json: [{ key: "ONLY_IN_A", value: "a" }] });
      res = await p.api("/v2/secrets", {
        method: "PUT",
        json: [{ key: "ONLY_IN_B", value: "b" }],
        headers: { "x-tenant-id": b.id },
      });
      assert.equal(res.status, 200);
      const inA = await (await p.api("/v2/secrets")).json();
      const inB = await (await p.api("/v2/secrets", { headers: { "x-tenant-id": b.id } })).json();
      assert.deepEqual(
        inA.map((s: { key: string }) => s.key),
        ["ONLY_IN_A"],
      );
      assert.deepEqual(
        inB.map((s: { key: string }) => s.key),
        ["ONLY_IN_B"],
      );
      // A key created in B sees only B; its secret in A is a 404, not a 403.
      const keyB = await (
        await p.api("/v2/api-keys", { method: "POST", json: { name: "b" }, headers: { "x-tenant-id": b.id } })
      ).json();
      res = await fetch(p.url + "/v2/secrets/ONLY_IN_A", { method: "DELETE", headers: { "x-api-key": keyB.key } });
      assert.equal(res.status, 404);
      res = await p.api("/v2/secrets", { headers: { "x-tenant-id": "00000000-0000-7000-8000-000000000000" } });
      assert.equal(res.status, 403);
      res = await p.api("/v2/secrets", { headers: { "x-tenant-id": "garbage" } });
      assert.equal(res.status, 403);
      const keys = await (await p.api("/v2/api-keys")).json();
      assert.ok(keys.every((k: { workspace_id: string }) => k.workspace_id === p.bootstrap.workspaceId));
      res = await p.api(`/v2/api-keys/${keyB.id}`, { method: "DELETE" });
      assert.equal(res.status, 404);
    });
  });
}
