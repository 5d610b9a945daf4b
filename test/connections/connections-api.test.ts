import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DIALECTS } from "../support/dialects.ts";
import { startConnectionsPlatform } from "./support/platform.ts";
import { AGENT_A, AGENT_B, seedProvider, seedToken } from "./support/seed.ts";

const CONNECTION_FIELDS = [
  "agent_id",
  "created_at",
  "created_by",
  "expires_at",
  "id",
  "oauth_token_id",
  "provider_account_label",
  "provider_id",
  "scopes",
];

for (const dialect of DIALECTS) {
  describe(`agent connections API (${dialect})`, () => {
    test("list, attach, detach: every field in every item, nulls where nullable", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      await seedProvider(p);
      let res = await p.api(`/v2/auth/agents/${AGENT_A}/connections`);
      assert.equal(res.status, 200);
      assert.deepEqual(await res.json(), { data: [] });

      const labelled = await seedToken(p, { subject: "s1", label: "work@example.test", scopes: ["read", "write"] });
      // No label and no expiry: the nullable fields must still be present, as null.
      const bare = await seedToken(p, { subject: "s2", label: undefined, expiresIn: null });
      await p.ctx.db
        .updateTable("oauth_tokens")
        .set({ provider_account_label: null })
        .where("id", "=", bare.id)
        .execute();

      res = await p.api(`/v2/auth/agents/${AGENT_A}/connections`, {
        method: "POST",
        json: { oauth_token_id: labelled.id },
      });
      assert.equal(res.status, 201);
      const created = await res.json();
      assert.deepEqual(Object.keys(created).sort(), CONNECTION_FIELDS);
      assert.equal(created.agent_id, AGENT_A);
      assert.deepEqual(created.scopes, ["read", "write"]);
      assert.equal(created.provider_account_label, "work@example.test");
      assert.equal(created.created_by, p.bootstrap.userId);

      res = await p.api(`/v2/auth/agents/${AGENT_A}/connections`, {
        method: "POST",
        json: { oauth_token_id: labelled.id },
      });
      assert.equal(res.status, 409);
      res = await p.api(`/v2/auth/agents/${AGENT_A.toUpperCase()}/connections`, {
        method: "POST",
        json: { oauth_token_id: bare.id },
      });
      assert.equal(res.status, 201, "an upper-case UUID names the same agent");

      res = await p.api(`/v2/auth/agents/${AGENT_A}/connections`);
      const list = (await res.json()).data;
      assert.equal(list.length, 2);
      for (const item of list) assert.deepEqual(Object.keys(item).sort(), CONNECTION_FIELDS);
      const bareItem = list.find((i: { oauth_token_id: string }) => i.oauth_token_id === bare.id);
      assert.equal(bareItem.provider_account_label, null);
      assert.equal(bareItem.expires_at, null);
      assert.ok(!Number.isNaN(Date.parse(list[0].created_at)));
      assert.ok(!Number.isNaN(Date.parse(list[0].expires_at)));

      res = await p.api(`/v2/auth/agents/${AGENT_B}/connections`);
      assert.deepEqual(await res.json(), { data: [] }, "connections belong to one agent");

      res = await p.api(`/v2/auth/agents/${AGENT_B}/connections/${created.id}`, { method: "DELETE" });
      assert.equal(res.status, 404, "a connection is deleted through its own agent only");
      res = await p.api(`/v2/auth/agents/${AGENT_A}/connections/${created.id}`, { method: "DELETE" });
      assert.equal(res.status, 204);
      res = await p.api(`/v2/auth/agents/${AGENT_A}/connections/${created.id}`, { method: "DELETE" });
      assert.equal(res.status, 404);
      assert.equal((await (await p.api(`/v2/auth/agents/${AGENT_A}/connections`)).json()).data.length, 1);
    });

    test("API key, bearer token and X-Tenant-Id; a workspace never sees another's connections", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      await seedProvider(p);
      const mine = await seedToken(p);
      await p.api(`/v2/auth/agents/${AGENT_A}/connections`, { method: "POST", json: { oauth_token_id: mine.id } });

      const bearer = (await (await p.api("/v2/tokens", { method: "POST" })).json()).access_token as string;
      let res = await p.api(`/v2/auth/agents/${AGENT_A}/connections`, {
        headers: { authorization: `Bearer ${bearer}` },
      });
      assert.equal(res.status, 200);
      assert.equal((await res.json()).data.length, 1);

      const other = (await (await p.api("/v2/workspaces", { method: "POST", json: { name: "other" } })).json())
        .id as string;
      const tenant = { "x-tenant-id": other };
      res = await p.api(`/v2/auth/agents/${AGENT_A}/connections`, { headers: tenant });
      assert.deepEqual(await res.json(), { data: [] }, "the other workspace sees nothing");
      res = await p.api(`/v2/auth/agents/${AGENT_A}/connections`, {
        headers: { ...tenant, authorization: `Bearer ${bearer}` },
      });
      assert.deepEqual(await res.json(), { data: [] }, "bearer + tenant selects the other workspace too");

      res = await p.api(`/v2/auth/agents/${AGENT_A}/connections`, {
        method: "POST",
        headers: tenant,
        json: { oauth_token_id: mine.id },
      });
      assert.equal(res.status, 404, "another workspace's token cannot be attached");
      const conn = (await (await p.api(`/v2/auth/agents/${AGENT_A}/connections`)).json()).data[0];
      res = await p.api(`/v2/auth/agents/${AGENT_A}/connections/${conn.id}`, { method: "DELETE", headers: tenant });
      assert.equal(res.status, 404, "another workspace's connection reads as missing");
      res = await p.api(`/v2/auth/providers/acme`, { headers: tenant });
      assert.equal(res.status, 404, "providers are per workspace");

      res = await fetch(`${p.url}/v2/auth/agents/${AGENT_A}/connections`);
      assert.equal(res.status, 401);
      res = await fetch(`${p.url}/v2/auth/agents/${AGENT_A}/connections`, { headers: tenant });
      assert.equal(res.status, 401, "a tenant id alone does not authenticate");
    });

    test("providers: create, read, patch, delete; the client secret is write-only", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      const secret = "client-secret-Planted-91f2";
      const body = {
        provider_id: "github",
        name: "GitHub",
        client_id: "Iv1.abc",
        client_secret: secret,
        auth_url: "https://github.com/login/oauth/authorize",
        token_url: "https://github.com/login/oauth/access_token",
        userinfo_url: "https://api.github.com/user",
        account_label_claim: "login",
        extra_authorize_params: { allow_signup: "false" },
      };
      let res = await p.api("/v2/auth/providers", { method: "POST", json: body });
      assert.equal(res.status, 200);
      const text = await res.text();
      assert.ok(!text.includes(secret));
      const created = JSON.parse(text);
      assert.equal(created.has_client_secret, true);
      assert.equal(created.uses_pkce, true);
      assert.equal(created.code_challenge_method, "S256");
      assert.equal(created.token_endpoint_auth_method, "client_secret_post");
      assert.equal(created.account_label_source, "userinfo");
      assert.equal(created.redirect_uri, `${p.url}/v2/auth/callback/github`);
      assert.equal(created.organization_id, p.bootstrap.workspaceId);

      res = await p.api("/v2/auth/providers", { method: "POST", json: body });
      assert.equal(res.status, 409);
      res = await p.api("/v2/auth/providers/github", {
        method: "PATCH",
        json: { client_secret: "rotated-secret-7", name: null, revocation_url: "https://github.com/revoke" },
      });
      assert.equal(res.status, 200);
      const patched = await res.json();
      assert.equal(patched.name, "GitHub", "null leaves a required field as it was");
      assert.equal(patched.revocation_url, "https://github.com/revoke");
      res = await p.api("/v2/auth/providers/github", { method: "PATCH", json: { revocation_url: null } });
      assert.equal((await res.json()).revocation_url, null, "null clears an optional URL");
      res = await p.api("/v2/auth/providers/github", {
        method: "PATCH",
        json: { token_endpoint_auth_method: "none", uses_pkce: false },
      });
      assert.equal(res.status, 422, "a public client without PKCE is refused");
      res = await p.api("/v2/auth/providers");
      const listed = await res.text();
      assert.ok(!listed.includes(secret) && !listed.includes("rotated-secret-7"));
      assert.equal(JSON.parse(listed).length, 1);
      res = await p.api("/v2/auth/providers/github", { method: "DELETE" });
      assert.equal(res.status, 204);
      res = await p.api("/v2/auth/providers/github");
      assert.equal(res.status, 404);
      assert.deepEqual(await res.json(), { detail: "OAuth provider not found" });
    });

    test("422 bodies for bad parameters on every endpoint", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      await seedProvider(p);
      const cases: Array<[string, string, unknown, Array<string | number>]> = [
        ["GET", "/v2/auth/agents/not-a-uuid/connections", undefined, ["path", "agent_id"]],
        ["GET", "/v2/auth/agents/123/connections", undefined, ["path", "agent_id"]],
        ["POST", "/v2/auth/agents/nope/connections", { oauth_token_id: AGENT_B }, ["path", "agent_id"]],
        ["POST", `/v2/auth/agents/${AGENT_A}/connections`, {}, ["body", "oauth_token_id"]],
        ["POST", `/v2/auth/agents/${AGENT_A}/connections`, { oauth_token_id: "x" }, ["body", "oauth_token_id"]],
        ["DELETE", `/v2/auth/agents/${AGENT_A}/connections/zzz`, undefined, ["path", "connection_id"]],
        ["DELETE", `/v2/auth/agents/zzz/connections/${AGENT_B}`, undefined, ["path", "agent_id"]],
        [
          "POST",
          "/v2/auth/providers",
          {
            provider_id: "x",
            name: "X",
            client_id: "c",
            client_secret: "s",
            auth_url: "ftp://x",
            token_url: "https://x/t",
          },
          ["body", "auth_url"],
        ],
        [
          "POST",
          "/v2/auth/providers",
          {
            provider_id: "bad id",
            name: "X",
            client_id: "c",
            client_secret: "s",
            auth_url: "https://x/a",
            token_url: "https://x/t",
          },
          ["body", "provider_id"],
        ],
        [
          "POST",
          "/v2/auth/providers",
          { provider_id: "x", name: "X", client_id: "c", auth_url: "https://x/a", token_url: "https://x/t" },
          ["body", "client_secret"],
        ],
        [
          "POST",
          "/v2/auth/providers",
          {
            provider_id: "x",
            name: "X",
            client_id: "c",
            client_secret: "s",
            auth_url: "https://x/a",
            token_url: "https://x/t",
            extra_authorize_params: { state: "fixed" },
          },
          ["body", "extra_authorize_params"],
        ],
        [
          "POST",
          "/v2/auth/providers",
          {
            provider_id: "x",
            name: "X",
            client_id: "c",
            client_secret: "s",
            auth_url: "https://x/a",
            token_url: "https://x/t",
            token_endpoint_auth_method: "private_key_jwt",
          },
          ["body", "token_endpoint_auth_method"],
        ],
        ["PATCH", "/v2/auth/providers/acme", { uses_pkce: "yes" }, ["body", "uses_pkce"]],
        ["GET", "/v2/auth/providers/bad%20id", undefined, ["path", "provider_id"]],
        ["POST", "/v2/auth/authenticate", { scopes: [] }, ["body", "provider"]],
        ["POST", "/v2/auth/authenticate", { provider: "acme" }, ["body", "scopes"]],
        ["POST", "/v2/auth/authenticate", { provider: "acme", scopes: ["a b"] }, ["body", "scopes", 0]],
        [
          "POST",
          "/v2/auth/authenticate",
          { provider: "acme", scopes: [], agent_id: "assistant-1" },
          ["body", "agent_id"],
        ],
        ["POST", "/v2/auth/authenticate", { provider: "acme", scopes: [], token_id: "t" }, ["body", "token_id"]],
        ["GET", "/v2/auth/wait/not-an-id", undefined, ["path", "auth_id"]],
        ["GET", `/v2/auth/wait/${AGENT_A}?timeout=abc`, undefined, ["query", "timeout"]],
        ["GET", `/v2/auth/wait/${AGENT_A}?timeout=9999`, undefined, ["query", "timeout"]],
        ["GET", "/v2/auth/callback/acme?code=abc", undefined, ["query", "state"]],
        ["POST", "/v2/auth/callback/acme", { code: "abc" }, ["body", "state"]],
        ["GET", "/v2/auth/tokens/exists", undefined, ["query", "provider_id"]],
        ["PATCH", `/v2/auth/tokens/nope/metadata`, { is_default: true }, ["path", "token_id"]],
        ["PATCH", `/v2/auth/tokens/${AGENT_A}/metadata`, { is_default: "yes" }, ["body", "is_default"]],
        ["DELETE", "/v2/auth/tokens/nope", undefined, ["path", "token_id"]],
        ["DELETE", "/v2/auth/tokens", undefined, ["query", "provider_id"]],
        ["DELETE", `/v2/auth/tokens/${AGENT_A}?force=maybe`, undefined, ["query", "force"]],
      ];
      for (const [method, path, body, loc] of cases) {
        const res = await p.api(path, { method, ...(body === undefined ? {} : { json: body }) });
        const text = await res.text();
        assert.equal(res.status, 422, `${method} ${path} ${JSON.stringify(body)} -> ${res.status} ${text}`);
        const parsed = JSON.parse(text);
        assert.ok(Array.isArray(parsed.detail) && parsed.detail.length > 0, text);
        for (const d of parsed.detail) {
          assert.deepEqual(Object.keys(d).sort(), ["loc", "msg", "type"]);
          assert.ok(typeof d.msg === "string" && typeof d.type === "string");
          assert.ok(d.loc.every((x: unknown) => typeof x === "string" || Number.isInteger(x)));
        }
        assert.ok(
          parsed.detail.some((d: { loc: unknown[] }) => JSON.stringify(d.loc) === JSON.stringify(loc)),
          `${method} ${path}: expected loc ${JSON.stringify(loc)} in ${text}`,
        );
      }
      const res = await p.api("/v2/auth/agents/not-a-uuid/connections");
      assert.deepEqual(await res.json(), {
        detail: [{ loc: ["path", "agent_id"], msg: "Input should be a valid UUID", type: "uuid_parsing" }],
      });
    });
  });
}
