import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, test } from "node:test";
import { addActiveKey, loadKeyring, reloadKeyring } from "../../src/crypto/keyring.ts";
import { SecretBox } from "../../src/crypto/secret-box.ts";
import { openProviderSecret, getProvider } from "../../src/connections/provider-store.ts";
import { openAccessToken, openRefreshToken, reloadToken } from "../../src/connections/token-vault.ts";
import { resealAll } from "../../src/secrets/rotate-master-key.ts";
import { DIALECTS } from "../support/dialects.ts";
import { Browser } from "./support/browser.ts";
import { startMockAuthServer } from "./support/mock-oauth.ts";
import { json, startConnectionsPlatform } from "./support/platform.ts";
import { AGENT_A } from "./support/seed.ts";

const CLIENT_SECRET = "planted-ClientSecret-5d2e8a";
const ROTATED_SECRET = "planted-RotatedSecret-0c4b1f";
const ACCESS = "planted-AccessToken-93b7e1";
const REFRESH = "planted-RefreshToken-a61f0d";
const ACCESS2 = "planted-AccessToken2-7f20c9";
const REFRESH2 = "planted-RefreshToken2-e48d35";

for (const dialect of DIALECTS) {
  describe(`connection secrets at rest (${dialect})`, () => {
    test("planted client secrets and tokens appear in no response, no log line, no database byte in plain text", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      const mock = await startMockAuthServer(t);
      const responses: Array<{ what: string; text: string }> = [];
      const call = async (what: string, path: string, init: RequestInit & { json?: unknown } = {}) => {
        const res = await p.api(path, init);
        const text = await res.text();
        responses.push({ what, text });
        return text ? JSON.parse(text) : null;
      };
      await call("create provider", "/v2/auth/providers", {
        method: "POST",
        json: mock.providerBody("mock", { client_secret: CLIENT_SECRET }),
      });
      await call("bad create", "/v2/auth/providers", {
        method: "POST",
        json: { ...mock.providerBody("mock2", { client_secret: CLIENT_SECRET }), oops: 1 },
      });
      await call("malformed", "/v2/auth/providers", {
        method: "POST",
        body: `{"client_secret":"${CLIENT_SECRET}"`,
        headers: { "content-type": "application/json" },
      });
      await call("patch", "/v2/auth/providers/mock", { method: "PATCH", json: { client_secret: ROTATED_SECRET } });

      mock.service.once("beforeResponse", (r: { body: Record<string, unknown> }) =>
        Object.assign(r.body, { access_token: ACCESS, refresh_token: REFRESH, expires_in: 3600 }),
      );
      const started = await call("authenticate", "/v2/auth/authenticate", {
        method: "POST",
        json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A },
      });
      const page = await new Browser().open(started.url);
      responses.push({ what: "callback page", text: page.body });
      const waited = await json(p.api(`/v2/auth/wait/${started.auth_id}?timeout=5`));
      assert.equal(waited.token, ACCESS, "the access token is handed out where it is asked for");
      const codeRequest = mock.tokenRequests.find((r) => r.grant_type === "authorization_code")!;
      assert.equal(
        codeRequest.client_secret,
        ROTATED_SECRET,
        "the rotated client secret is what the provider receives",
      );

      // Force a refresh, which rotates both tokens.
      const tokenId = waited.metadata.token_id;
      await p.ctx.db
        .updateTable("oauth_tokens")
        .set({ expires_at: new Date(Date.now() + 5000).toISOString() })
        .where("id", "=", tokenId)
        .execute();
      mock.service.once("beforeResponse", (r: { body: Record<string, unknown> }) =>
        Object.assign(r.body, { access_token: ACCESS2, refresh_token: REFRESH2, expires_in: 3600 }),
      );
      const refreshed = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A },
        }),
      );
      assert.equal(refreshed.token, ACCESS2);
      assert.equal(mock.refreshRequests()[0].refresh_token, REFRESH);

      for (const [what, path] of [
        ["providers", "/v2/auth/providers"],
        ["provider", "/v2/auth/providers/mock"],
        ["tokens", "/v2/auth/tokens"],
        ["exists", "/v2/auth/tokens/exists?provider_id=mock"],
        ["connections", `/v2/auth/agents/${AGENT_A}/connections`],
        ["openapi", "/openapi.json"],
      ])
        await call(what, path);

      for (const { what, text } of responses) {
        for (const planted of [CLIENT_SECRET, ROTATED_SECRET, REFRESH, REFRESH2, ACCESS, ACCESS2]) {
          assert.ok(!text.includes(planted), `${what} response leaked ${planted}`);
        }
      }
      const logs = p.logs();
      assert.ok(logs.includes("token refreshed"), "the logs were captured");
      for (const planted of [CLIENT_SECRET, ROTATED_SECRET, REFRESH, REFRESH2, ACCESS, ACCESS2])
        assert.ok(!logs.includes(planted), `logs leaked ${planted}`);

      // Stored, sealed, and they open.
      const row = (await reloadToken(p.ctx.db, tokenId))!;
      assert.equal(openAccessToken(p.ctx.box, row), ACCESS2);
      assert.equal(openRefreshToken(p.ctx.box, row), REFRESH2);
      assert.equal(
        openProviderSecret(p.ctx.box, await getProvider(p.ctx.db, p.bootstrap.workspaceId, "mock")).clientSecret,
        ROTATED_SECRET,
      );

      // Key rotation re-seals every connection column too, and the values still open.
      addActiveKey(p.home);
      const box = new SecretBox(loadKeyring(p.home, null), () => reloadKeyring(p.home, null));
      const { resealed } = await resealAll(p.ctx.db, box);
      assert.ok(resealed >= 3, `resealed ${resealed}`);
      const after = (await reloadToken(p.ctx.db, tokenId))!;
      assert.equal(after.access_key_id, box.activeKeyId);
      assert.equal(after.refresh_key_id, box.activeKeyId);
      assert.equal(
        openAccessToken(p.ctx.box, after),
        ACCESS2,
        "the running server opens values sealed under the new key",
      );
      assert.equal(
        openProviderSecret(p.ctx.box, await getProvider(p.ctx.db, p.bootstrap.workspaceId, "mock")).clientSecret,
        ROTATED_SECRET,
      );

      const planted = [CLIENT_SECRET, ROTATED_SECRET, ACCESS, REFRESH, ACCESS2, REFRESH2];
      if (dialect === "sqlite") {
        await p.stop();
        for (const f of fs.readdirSync(p.home)) {
          const content = fs.readFileSync(path.join(p.home, f));
          for (const v of planted) assert.ok(!content.includes(Buffer.from(v)), `${f} holds ${v} in plain text`);
        }
      } else {
        const dump = execFileSync("pg_dump", ["--data-only", "--schema", p.pgSchema!, p.databaseUrl!], {
          encoding: "utf8",
          maxBuffer: 64 << 20,
        });
        assert.match(dump, /COPY .*oauth_tokens/);
        for (const v of planted) assert.ok(!dump.includes(v), `PostgreSQL holds ${v} in plain text`);
      }
    });
  });
}
