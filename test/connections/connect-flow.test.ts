import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { openRefreshToken, reloadToken } from "../../src/connections/token-vault.ts";
import { DIALECTS } from "../support/dialects.ts";
import type { TestPlatform } from "../support/platform.ts";
import { Browser } from "./support/browser.ts";
import { startMockAuthServer, type MockAuthServer } from "./support/mock-oauth.ts";
import { json, startConnectionsPlatform } from "./support/platform.ts";
import { AGENT_A, AGENT_B } from "./support/seed.ts";

async function addProvider(
  p: TestPlatform,
  mock: MockAuthServer,
  id = "mock",
  extra: Record<string, unknown> = {},
): Promise<void> {
  const res = await p.api("/v2/auth/providers", { method: "POST", json: mock.providerBody(id, extra) });
  assert.equal(res.status, 200, await res.clone().text());
}

/** Time passes: the token now expires in `seconds`. */
async function nearExpiry(p: TestPlatform, tokenId: string, seconds: number): Promise<void> {
  await p.ctx.db
    .updateTable("oauth_tokens")
    .set({ expires_at: new Date(Date.now() + seconds * 1000).toISOString() })
    .where("id", "=", tokenId)
    .execute();
}

/** authenticate → pending, follow the URL in a real HTTP client, return what the wait saw. */
async function connect(p: TestPlatform, body: Record<string, unknown>, browser = new Browser()) {
  const started = await json(p.api("/v2/auth/authenticate", { method: "POST", json: body }));
  assert.ok(["pending", "connection_required", "token_expired"].includes(started.status), JSON.stringify(started));
  const waiting = json(p.api(`/v2/auth/wait/${started.auth_id}?timeout=10`));
  const page = await browser.open(started.url);
  const waited = await waiting;
  return { started, page, waited };
}

for (const dialect of DIALECTS) {
  describe(`connect flow against oauth2-mock-server (${dialect})`, () => {
    test("authenticate → authorize redirect → callback → wait completed; then completed without a flow", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      const mock = await startMockAuthServer(t);
      await addProvider(p, mock);
      const { started, page, waited } = await connect(p, {
        provider: "mock",
        scopes: ["repo", "read:user"],
        agent_id: AGENT_A,
      });
      assert.equal(started.status, "pending");
      const authorize = new URL(started.url);
      assert.equal(authorize.origin + authorize.pathname, `${mock.url}/authorize`);
      assert.equal(authorize.searchParams.get("code_challenge_method"), "S256");
      assert.equal(authorize.searchParams.get("redirect_uri"), `${p.url}/v2/auth/callback/mock`);
      assert.equal(authorize.searchParams.get("scope"), "repo read:user");
      assert.equal(page.status, 200, page.body);
      assert.match(page.body, /connected as john@example\.test/);
      assert.equal(page.headers.get("referrer-policy"), "no-referrer");
      assert.equal(page.headers.get("cache-control"), "no-store");

      assert.equal(waited.status, "completed", JSON.stringify(waited));
      assert.equal(waited.token, mock.issued[0].access_token);
      assert.equal(waited.metadata.provider_account_label, "john@example.test");
      const codeRequest = mock.tokenRequests.find((r) => r.grant_type === "authorization_code")!;
      assert.ok(codeRequest.code_verifier && codeRequest.code_verifier.length >= 43, "PKCE verifier sent");
      assert.equal(codeRequest.client_secret, "mock-client-secret", "client_secret_post by default");

      const { data } = await json(p.api(`/v2/auth/agents/${AGENT_A}/connections`));
      assert.equal(data.length, 1);
      assert.equal(data[0].provider_id, "mock");
      assert.equal(data[0].provider_account_label, "john@example.test");
      assert.deepEqual(data[0].scopes, ["repo", "read:user"]);
      assert.equal(data[0].oauth_token_id, waited.metadata.token_id);

      const again = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["repo"], agent_id: AGENT_A },
        }),
      );
      assert.equal(again.status, "completed");
      assert.equal(again.token, waited.token);
      assert.equal(mock.tokenRequests.length, 1, "a fresh token needs no call to the provider");

      const otherAgent = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["repo"], agent_id: AGENT_B },
        }),
      );
      assert.equal(otherAgent.status, "connection_required", "an account is never attached to another agent silently");
      assert.deepEqual(otherAgent.metadata.token_ids, [waited.metadata.token_id]);
      assert.ok(otherAgent.url && otherAgent.auth_id);
      const picked = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["repo"], agent_id: AGENT_B, token_id: waited.metadata.token_id },
        }),
      );
      assert.equal(picked.status, "completed", "choosing the account by token_id attaches it");
      assert.equal((await json(p.api(`/v2/auth/agents/${AGENT_B}/connections`))).data.length, 1);

      const more = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["repo", "admin:org"], agent_id: AGENT_A },
        }),
      );
      assert.equal(more.status, "pending", "more scopes than granted start a new consent");
    });

    test("state is single-use, bound to its provider, and expires", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      const mock = await startMockAuthServer(t);
      await addProvider(p, mock);
      await addProvider(p, mock, "other");
      const browser = new Browser();
      const { page } = await connect(p, { provider: "mock", scopes: ["a"] }, browser);
      const callback = page.trail.find((u) => u.includes("/v2/auth/callback/"))!;
      let res = await fetch(callback);
      assert.equal(res.status, 400, "a replayed callback is refused");
      assert.match((await res.json()).detail, /already used/);
      res = await fetch(callback, { headers: { accept: "text/html" } });
      assert.equal(res.status, 400);
      assert.match(await res.text(), /Connection failed/);

      // While a flow is pending the same request gets it back; force_new starts another.
      const a = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["z"], agent_id: AGENT_A },
        }),
      );
      const b = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["z"], agent_id: AGENT_A },
        }),
      );
      assert.deepEqual([b.auth_id, b.url], [a.auth_id, a.url]);
      const c = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["z"], agent_id: AGENT_A, force_new: true },
        }),
      );
      assert.notEqual(c.auth_id, a.auth_id);
      const d = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["z"], agent_id: AGENT_B },
        }),
      );
      assert.notEqual(d.auth_id, a.auth_id, "another agent's flow is its own");

      // A state sent to another provider's callback does not match.
      let started = await json(
        p.api("/v2/auth/authenticate", { method: "POST", json: { provider: "mock", scopes: ["a"], force_new: true } }),
      );
      const state = new URL(started.url).searchParams.get("state")!;
      res = await fetch(`${p.url}/v2/auth/callback/other?state=${encodeURIComponent(state)}&code=x`);
      assert.equal(res.status, 400);
      const tries = mock.tokenRequests.length;
      res = await fetch(`${p.url}/v2/auth/callback/mock?state=${encodeURIComponent(state + "x")}&code=x`);
      assert.equal(res.status, 400, "a forged state is unknown");
      assert.equal(mock.tokenRequests.length, tries, "nothing was exchanged for unknown states");

      // Expired: the row says so, the callback refuses, the wait reports the failure.
      started = await json(
        p.api("/v2/auth/authenticate", { method: "POST", json: { provider: "mock", scopes: ["a"], force_new: true } }),
      );
      await p.ctx.db
        .updateTable("oauth_auth_requests")
        .set({ expires_at: new Date(Date.now() - 1000).toISOString() })
        .where("id", "=", started.auth_id)
        .execute();
      const expiredPage = await browser.open(started.url);
      assert.equal(expiredPage.status, 400);
      const waited = await json(p.api(`/v2/auth/wait/${started.auth_id}?timeout=1`));
      assert.equal(waited.status, "failed");
      assert.match(waited.error, /expired/);

      // The provider's own error (the person declined) fails the flow, once.
      started = await json(
        p.api("/v2/auth/authenticate", { method: "POST", json: { provider: "mock", scopes: ["a"], force_new: true } }),
      );
      mock.service.once("beforeAuthorizeRedirect", (r: { url: URL }) => {
        r.url.searchParams.delete("code");
        r.url.searchParams.set("error", "access_denied");
      });
      const declined = await browser.open(started.url);
      assert.equal(declined.status, 400);
      assert.match(declined.body, /access_denied/);
      assert.equal((await json(p.api(`/v2/auth/wait/${started.auth_id}?timeout=0`))).status, "failed");
      assert.equal((await json(p.api(`/v2/auth/wait/${AGENT_A}?timeout=0`))).status, "not_found");
    });

    test("POST callback bridge finishes a flow with code and state", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      const mock = await startMockAuthServer(t);
      await addProvider(p, mock, "mock", { token_endpoint_auth_method: "client_secret_basic" });
      const started = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A },
        }),
      );
      // The provider redirects to a front-end page (here: we stop at the first redirect and read it).
      const res = await fetch(started.url, { redirect: "manual" });
      const location = new URL(res.headers.get("location")!);
      const done = await json(
        fetch(`${p.url}/v2/auth/callback/mock`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ code: location.searchParams.get("code"), state: location.searchParams.get("state") }),
        }),
      );
      assert.equal(done.status, "completed");
      assert.equal(done.agent_id, AGENT_A);
      const exchange = mock.tokenRequests.find((r) => r.grant_type === "authorization_code")!;
      // RFC 6749 §2.3.1: id and secret are form-encoded before the Basic encoding.
      const basic = Buffer.from(exchange.authorization!.replace(/^Basic /, ""), "base64")
        .toString("utf8")
        .split(":")
        .map(decodeURIComponent);
      assert.deepEqual(basic, ["mock-client", "mock-client-secret"], "client_secret_basic");
      assert.equal(exchange.client_secret, undefined, "no secret in the body with client_secret_basic");
      assert.equal((await json(p.api(`/v2/auth/wait/${started.auth_id}?timeout=0`))).status, "completed");
    });

    test("several accounts per provider: labelled, one default, picked by token_id", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      const mock = await startMockAuthServer(t);
      await addProvider(p, mock);
      mock.account = { sub: "u-work", email: "me@work.test" };
      const work = (await connect(p, { provider: "mock", scopes: ["a"] })).waited;
      mock.account = { sub: "u-home", email: "me@home.test" };
      const home = (await connect(p, { provider: "mock", scopes: ["a"], force_new: true, is_default: false })).waited;
      assert.notEqual(work.metadata.token_id, home.metadata.token_id);
      let tokens = await json(p.api("/v2/auth/tokens?provider_id=mock"));
      assert.deepEqual(tokens.map((x: { provider_account_label: string }) => x.provider_account_label).sort(), [
        "me@home.test",
        "me@work.test",
      ]);
      assert.equal(tokens.find((x: { is_default: boolean }) => x.is_default).provider_account_label, "me@work.test");
      for (const x of tokens)
        assert.deepEqual(Object.keys(x).sort(), [
          "created_at",
          "expires_at",
          "id",
          "is_default",
          "provider_account_label",
          "provider_id",
          "scopes",
          "status",
          "updated_at",
          "user_id",
        ]);

      let r = await json(p.api("/v2/auth/authenticate", { method: "POST", json: { provider: "mock", scopes: ["a"] } }));
      assert.equal(r.metadata.provider_account_label, "me@work.test", "the default account");
      r = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["a"], token_id: home.metadata.token_id },
        }),
      );
      assert.equal(r.token, home.token);

      const patched = await json(
        p.api(`/v2/auth/tokens/${home.metadata.token_id}/metadata`, {
          method: "PATCH",
          json: { is_default: true, provider_account_label: "Home" },
        }),
      );
      assert.equal(patched.is_default, true);
      assert.equal(patched.provider_account_label, "Home");
      tokens = await json(p.api("/v2/auth/tokens?provider_id=mock"));
      assert.equal(tokens.filter((x: { is_default: boolean }) => x.is_default).length, 1);

      // The same account again updates its token rather than adding a third.
      mock.account = { sub: "u-work", email: "me@work.test" };
      await connect(p, { provider: "mock", scopes: ["a"], force_new: true, is_default: false });
      assert.equal((await json(p.api("/v2/auth/tokens"))).length, 2);
      assert.deepEqual(await json(p.api("/v2/auth/tokens/exists?provider_id=mock")), { has_token: true });
      assert.deepEqual(await json(p.api("/v2/auth/tokens/exists?provider_id=mock&user_id=someone-else")), {
        has_token: false,
      });

      // Owners are separate: an end user's id scopes its own accounts.
      const bob = (await connect(p, { provider: "mock", scopes: ["a"], user_id: "bob@example.test" })).waited;
      assert.equal(bob.status, "completed");
      assert.equal((await json(p.api("/v2/auth/tokens?user_id=bob@example.test"))).length, 1);
      assert.equal(
        (
          await p.api(`/v2/auth/tokens/${bob.metadata.token_id}/metadata`, {
            method: "PATCH",
            json: { is_default: true },
          })
        ).status,
        404,
        "owner only",
      );
    });

    test("refresh near expiry; a rotated refresh token is stored, a missing one keeps the old", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      const mock = await startMockAuthServer(t);
      await addProvider(p, mock);
      const first = (await connect(p, { provider: "mock", scopes: ["a"], agent_id: AGENT_A })).waited;
      const tokenId = first.metadata.token_id as string;
      const firstRefresh = mock.issued[0].refresh_token!;
      await nearExpiry(p, tokenId, 30);

      // 30 s left, under the 120 s skew: the read refreshes, with the stored refresh token.
      mock.service.once("beforeResponse", (r: { body: Record<string, unknown> }) => (r.body.expires_in = 30));
      let r = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A },
        }),
      );
      assert.equal(r.status, "completed");
      assert.equal(mock.refreshRequests().length, 1);
      assert.equal(mock.refreshRequests()[0].refresh_token, firstRefresh);
      assert.equal(r.token, mock.issued[1].access_token);
      const rotated = mock.issued[1].refresh_token!;
      assert.notEqual(rotated, firstRefresh);
      assert.equal(
        openRefreshToken(p.ctx.box, (await reloadToken(p.ctx.db, tokenId))!),
        rotated,
        "the rotated refresh token replaced the old one",
      );

      // Next refresh uses the rotated one; the answer has no refresh_token: the rotated one stays.
      mock.service.once("beforeResponse", (res: { body: Record<string, unknown> }) => delete res.body.refresh_token);
      r = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A },
        }),
      );
      assert.equal(mock.refreshRequests().length, 2);
      assert.equal(mock.refreshRequests()[1].refresh_token, rotated);
      const row = (await reloadToken(p.ctx.db, tokenId))!;
      assert.equal(
        openRefreshToken(p.ctx.box, row),
        rotated,
        "a refresh answer without a refresh token keeps the stored one",
      );
      assert.ok(Date.parse(row.expires_at!) > Date.now() + 3000 * 1000);
      assert.equal((await json(p.api(`/v2/auth/agents/${AGENT_A}/connections`))).data[0].expires_at, row.expires_at);
      r = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A },
        }),
      );
      assert.equal(mock.refreshRequests().length, 2, "fresh again: no further refresh");
    });

    test("background sweep refreshes tokens before anyone asks", async (t) => {
      const p = await startConnectionsPlatform(t, dialect, { sweepIntervalSeconds: 1, sweepWindowSeconds: 600 });
      if (!p) return;
      const mock = await startMockAuthServer(t);
      await addProvider(p, mock);
      mock.service.once("beforeResponse", (r: { body: Record<string, unknown> }) => (r.body.expires_in = 300));
      await connect(p, { provider: "mock", scopes: ["a"] });
      const deadline = Date.now() + 5000;
      while (mock.refreshRequests().length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      assert.equal(mock.refreshRequests().length, 1, "the sweep refreshed the token expiring within its window");
      await new Promise((r) => setTimeout(r, 1500));
      assert.equal(mock.refreshRequests().length, 1, "and only once");
    });

    test("invalid_grant marks the token token_expired, re-auth replaces it; transient errors are 503 not 500", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      const mock = await startMockAuthServer(t);
      await addProvider(p, mock);
      const first = (await connect(p, { provider: "mock", scopes: ["a"], agent_id: AGENT_A })).waited;
      const tokenId = first.metadata.token_id;
      await nearExpiry(p, tokenId, 10);

      // Transient: the token endpoint fails with 503 on every attempt; the token is still valid for 10 s.
      const fail503 = (r: { body: unknown; statusCode: number }, req: { body: { grant_type: string } }) => {
        if (req.body.grant_type !== "refresh_token") return;
        r.statusCode = 503;
        r.body = { error: "temporarily_unavailable" };
      };
      mock.service.on("beforeResponse", fail503);
      let res = await p.api("/v2/auth/authenticate", {
        method: "POST",
        json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A },
      });
      assert.equal(res.status, 200, "a token that still works is handed out while the provider is down");
      assert.equal((await res.json()).token, first.token);
      assert.ok(mock.refreshRequests().length >= 2, "transient failures were retried");
      // Expired for real: the caller gets a 503 with Retry-After, never a 500.
      await p.ctx.db
        .updateTable("oauth_tokens")
        .set({
          expires_at: new Date(Date.now() - 1000).toISOString(),
          refresh_lease_until: null,
          refresh_lease_owner: null,
        })
        .where("id", "=", tokenId)
        .execute();
      res = await p.api("/v2/auth/authenticate", {
        method: "POST",
        json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A },
      });
      assert.equal(res.status, 503, await res.clone().text());
      assert.ok(res.headers.get("retry-after"));
      mock.service.off("beforeResponse", fail503);

      await p.ctx.db
        .updateTable("oauth_tokens")
        .set({ refresh_lease_until: null, refresh_lease_owner: null })
        .where("id", "=", tokenId)
        .execute();
      mock.service.once("beforeResponse", (r: { body: unknown; statusCode: number }) => {
        r.statusCode = 400;
        r.body = { error: "invalid_grant", error_description: "refresh token revoked" };
      });
      const expired = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A },
        }),
      );
      assert.equal(expired.status, "token_expired");
      assert.equal(expired.metadata.token_id, tokenId);
      assert.ok(expired.url && expired.auth_id, "a re-authentication flow is offered");
      const tokens = await json(p.api("/v2/auth/tokens"));
      assert.equal(tokens[0].status, "token_expired");

      const page = await new Browser().open(expired.url);
      assert.equal(page.status, 200);
      const after = await json(
        p.api("/v2/auth/authenticate", {
          method: "POST",
          json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A },
        }),
      );
      assert.equal(after.status, "completed");
      assert.equal(after.metadata.token_id, tokenId, "re-authentication replaced the same token");
      assert.equal((await json(p.api(`/v2/auth/agents/${AGENT_A}/connections`))).data.length, 1);
    });

    test("delete revokes at the provider (RFC 7009) first, then deletes token and connections", async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      const mock = await startMockAuthServer(t);
      await addProvider(p, mock);
      const w = (await connect(p, { provider: "mock", scopes: ["a"], agent_id: AGENT_A })).waited;
      const issued = mock.issued[0];

      const revokeCalls = mock.revocations.length;
      // A revocation endpoint that answers 404: the provider failed.
      await p.api("/v2/auth/providers/mock", {
        method: "PATCH",
        json: { revocation_url: `${mock.url}/missing-revoke` },
      });
      let res = await p.api(`/v2/auth/tokens/${w.metadata.token_id}`, { method: "DELETE" });
      assert.equal(res.status, 502, "a failed revocation keeps the token");
      assert.equal((await json(p.api("/v2/auth/tokens"))).length, 1);
      assert.equal(mock.revocations.length, revokeCalls);
      await p.api("/v2/auth/providers/mock", { method: "PATCH", json: { revocation_url: `${mock.url}/revoke` } });

      res = await p.api(`/v2/auth/tokens/${w.metadata.token_id}`, { method: "DELETE" });
      assert.equal(res.status, 204);
      assert.deepEqual(
        mock.revocations.map((r) => [r.token_type_hint, r.token]),
        [
          ["refresh_token", issued.refresh_token],
          ["access_token", issued.access_token],
        ],
      );
      assert.deepEqual(await json(p.api("/v2/auth/tokens")), []);
      assert.deepEqual(await json(p.api(`/v2/auth/agents/${AGENT_A}/connections`)), { data: [] });
      assert.equal((await p.api(`/v2/auth/tokens/${w.metadata.token_id}`, { method: "DELETE" })).status, 404);

      // Bulk: all of the owner's tokens for a provider.
      mock.account = { sub: "x1", email: "x1@example.test" };
      await connect(p, { provider: "mock", scopes: ["a"] });
      mock.account = { sub: "x2", email: "x2@example.test" };
      await connect(p, { provider: "mock", scopes: ["a"], force_new: true });
      const bulk = await json(p.api("/v2/auth/tokens?provider_id=mock", { method: "DELETE" }));
      assert.deepEqual(bulk, { deleted: 2, revoked: 2, kept: [] });
      assert.equal(mock.revocations.length, 6);
    });
  });
}
