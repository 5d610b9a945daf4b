import assert from "node:assert/strict";
import { describe, test } from "node:test";
import * as client from "openid-client";
import { pkceVerifierAad } from "../../src/connections/sealed-columns.ts";
import { openRefreshToken, reloadToken } from "../../src/connections/token-vault.ts";
import { DIALECTS } from "../support/dialects.ts";
import type { TestPlatform } from "../support/platform.ts";
import { Browser } from "./support/browser.ts";
import { startStrictAuthServer, type StrictAuthServer } from "./support/oidc-server.ts";
import { json, startConnectionsPlatform } from "./support/platform.ts";
import { AGENT_A } from "./support/seed.ts";

function providerBody(as: StrictAuthServer, id: string, extra: Record<string, unknown> = {}) {
  return {
    provider_id: id,
    name: `Strict ${id}`,
    client_id: as.clients.basic.id,
    client_secret: as.clients.basic.secret,
    token_endpoint_auth_method: "client_secret_basic",
    issuer: as.issuer,
    auth_url: `${as.issuer}/auth`,
    token_url: `${as.issuer}/token`,
    revocation_url: `${as.issuer}/token/revocation`,
    userinfo_url: `${as.issuer}/me`,
    ...extra,
  };
}

async function setup(
  t: Parameters<typeof startConnectionsPlatform>[0],
  dialect: (typeof DIALECTS)[number],
): Promise<{ p: TestPlatform; as: StrictAuthServer } | null> {
  const p = await startConnectionsPlatform(t, dialect);
  if (!p) return null;
  // The redirect URI is fixed per provider id; every provider in these tests is called "strict".
  const as = await startStrictAuthServer(t, `${p.url}/v2/auth/callback/strict`);
  return { p, as };
}

async function start(p: TestPlatform, body: Record<string, unknown> = {}) {
  const started = await json(
    p.api("/v2/auth/authenticate", {
      method: "POST",
      json: { provider: "strict", scopes: ["openid", "email"], agent_id: AGENT_A, ...body },
    }),
  );
  assert.equal(started.status, "pending", JSON.stringify(started));
  return started as { url: string; auth_id: string };
}

const oidcQuiet = () => {
  // oidc-provider warns about development settings on every start; keep test output readable.
  const warn = console.warn;
  const info = console.info;
  console.warn = () => {};
  console.info = () => {};
  return () => {
    console.warn = warn;
    console.info = info;
  };
};

for (const dialect of DIALECTS) {
  describe(`connect flow against a strict oidc-provider (${dialect})`, () => {
    test("client_secret_basic + PKCE S256 + state + nonce + iss: completes; label from the id_token; refresh rotates", async (t) => {
      t.after(oidcQuiet());
      const s = await setup(t, dialect);
      if (!s) return;
      const { p, as } = s;
      assert.equal(
        (await p.api("/v2/auth/providers", { method: "POST", json: providerBody(as, "strict") })).status,
        200,
      );
      const started = await start(p);
      assert.ok(new URL(started.url).searchParams.get("nonce"), "a nonce for the id_token");
      const page = await new Browser("alice").open(started.url);
      assert.equal(page.status, 200, page.body);
      assert.match(page.body, /connected as alice@example\.test/);
      const waited = await json(p.api(`/v2/auth/wait/${started.auth_id}?timeout=5`));
      assert.equal(waited.status, "completed");
      assert.equal(waited.metadata.provider_account_label, "alice@example.test");

      // The token works at the provider.
      const userinfo = await fetch(`${as.issuer}/me`, { headers: { authorization: `Bearer ${waited.token}` } });
      assert.equal(userinfo.status, 200);
      assert.equal((await userinfo.json()).sub, "alice");

      // Refresh at a strict server that rotates refresh tokens: the new one is stored and works next time.
      const tokenId = waited.metadata.token_id;
      const before = openRefreshToken(p.ctx.box, (await reloadToken(p.ctx.db, tokenId))!);
      for (let i = 0; i < 2; i++) {
        await p.ctx.db
          .updateTable("oauth_tokens")
          .set({ expires_at: new Date(Date.now() + 5000).toISOString() })
          .where("id", "=", tokenId)
          .execute();
        const r = await json(
          p.api("/v2/auth/authenticate", {
            method: "POST",
            json: { provider: "strict", scopes: ["openid"], agent_id: AGENT_A },
          }),
        );
        assert.equal(r.status, "completed", JSON.stringify(r));
        assert.notEqual(r.token, waited.token);
      }
      const after = openRefreshToken(p.ctx.box, (await reloadToken(p.ctx.db, tokenId))!);
      assert.notEqual(after, before, "rotated refresh token stored");

      // Delete revokes at the provider: the refresh token is dead there afterwards.
      assert.equal((await p.api(`/v2/auth/tokens/${tokenId}`, { method: "DELETE" })).status, 204);
      const config = new client.Configuration(
        { issuer: as.issuer, token_endpoint: `${as.issuer}/token` },
        as.clients.basic.id,
        undefined,
        client.ClientSecretBasic(as.clients.basic.secret),
      );
      client.allowInsecureRequests(config);
      await assert.rejects(
        client.refreshTokenGrant(config, after!),
        (err: Error & { error?: string }) => err.error === "invalid_grant",
      );
    });

    test("client authentication is enforced: no credentials or the wrong secret fail the flow (no 500)", async (t) => {
      t.after(oidcQuiet());
      const s = await setup(t, dialect);
      if (!s) return;
      const { p, as } = s;
      // The confidential client configured as if it were public: no client authentication at all.
      // (oidc-provider accepts client_secret_post and client_secret_basic interchangeably.)
      await p.api("/v2/auth/providers", {
        method: "POST",
        json: providerBody(as, "strict", { token_endpoint_auth_method: "none", client_secret: null }),
      });
      let started = await start(p);
      let page = await new Browser().open(started.url);
      assert.equal(page.status, 400, page.body);
      assert.match(page.body, /invalid_client/);
      let waited = await json(p.api(`/v2/auth/wait/${started.auth_id}?timeout=1`));
      assert.equal(waited.status, "failed");
      assert.match(waited.error, /invalid_client/);

      await p.api("/v2/auth/providers/strict", {
        method: "PATCH",
        json: { token_endpoint_auth_method: "client_secret_basic", client_secret: "wrong-secret" },
      });
      started = await start(p);
      page = await new Browser().open(started.url);
      assert.equal(page.status, 400);
      waited = await json(p.api(`/v2/auth/wait/${started.auth_id}?timeout=1`));
      assert.match(waited.error, /invalid_client/);
      assert.deepEqual(await json(p.api("/v2/auth/tokens")), []);
    });

    test("PKCE is enforced: no challenge is refused at /authorize, a wrong verifier at /token", async (t) => {
      t.after(oidcQuiet());
      const s = await setup(t, dialect);
      if (!s) return;
      const { p, as } = s;
      await p.api("/v2/auth/providers", { method: "POST", json: providerBody(as, "strict", { uses_pkce: false }) });
      let started = await start(p);
      assert.equal(new URL(started.url).searchParams.get("code_challenge"), null);
      let page = await new Browser().open(started.url);
      assert.equal(page.status, 400, "the provider refused the request without PKCE and our callback says so");
      assert.match(page.body, /invalid_request/);

      // A public client with PKCE; the stored verifier is swapped before the callback arrives.
      await p.api("/v2/auth/providers/strict", {
        method: "PATCH",
        json: { uses_pkce: true, token_endpoint_auth_method: "none", client_id: as.clients.public.id },
      });
      started = await start(p);
      const wrong = p.ctx.box.seal(
        client.randomPKCECodeVerifier(),
        pkceVerifierAad(p.bootstrap.workspaceId, started.auth_id),
      );
      await p.ctx.db
        .updateTable("oauth_auth_requests")
        .set({ pkce_key_id: wrong.keyId, pkce_cipher: wrong.blob })
        .where("id", "=", started.auth_id)
        .execute();
      page = await new Browser().open(started.url);
      assert.equal(page.status, 400);
      assert.match(page.body, /invalid_grant/);

      // And the same public client with the right verifier completes.
      started = await start(p);
      page = await new Browser().open(started.url);
      assert.equal(page.status, 200, page.body);
      assert.equal((await json(p.api(`/v2/auth/wait/${started.auth_id}?timeout=5`))).status, "completed");
    });
  });
}
