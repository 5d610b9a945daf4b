import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { DIALECTS } from "../support/dialects.ts";
import type { TestPlatform } from "../support/platform.ts";
import { freePort, runWharf, waitForOk } from "../support/process.ts";
import { requireCapability } from "../support/requirements.ts";
import { Browser } from "./support/browser.ts";
import { startMockAuthServer, type MockAuthServer } from "./support/mock-oauth.ts";
import { json, startConnectionsPlatform } from "./support/platform.ts";
import { AGENT_A } from "./support/seed.ts";

const READERS = 20;

async function connected(p: TestPlatform, mock: MockAuthServer): Promise<string> {
  assert.equal((await p.api("/v2/auth/providers", { method: "POST", json: mock.providerBody("mock") })).status, 200);
  const started = await json(
    p.api("/v2/auth/authenticate", { method: "POST", json: { provider: "mock", scopes: ["a"], agent_id: AGENT_A } }),
  );
  assert.equal((await new Browser().open(started.url)).status, 200);
  const waited = await json(p.api(`/v2/auth/wait/${started.auth_id}?timeout=5`));
  assert.equal(waited.status, "completed");
  return waited.metadata.token_id;
}

const setExpiry = (p: TestPlatform, tokenId: string, secondsFromNow: number) =>
  p.ctx.db
    .updateTable("oauth_tokens")
    .set({ expires_at: new Date(Date.now() + secondsFromNow * 1000).toISOString() })
    .where("id", "=", tokenId)
    .execute();

/** `READERS` concurrent authenticate calls spread over the given base URLs. */
async function readConcurrently(
  bases: string[],
  apiKey: string,
): Promise<Array<{ status: number; body: { status: string; token: string } }>> {
  return Promise.all(
    Array.from({ length: READERS }, async (_, i) => {
      const res = await fetch(`${bases[i % bases.length]}/v2/auth/authenticate`, {
        method: "POST",
        headers: { "x-api-key": apiKey, "content-type": "application/json" },
        body: JSON.stringify({ provider: "mock", scopes: ["a"], agent_id: AGENT_A }),
      });
      return { status: res.status, body: await res.json() };
    }),
  );
}

for (const dialect of DIALECTS) {
  describe(`single-flight refresh (${dialect})`, () => {
    test(`${READERS} concurrent reads of an expired token: exactly one refresh, every reader gets the new token`, async (t) => {
      const p = await startConnectionsPlatform(t, dialect);
      if (!p) return;
      const mock = await startMockAuthServer(t);
      const tokenId = await connected(p, mock);
      mock.tokenDelayMs = 300;
      await setExpiry(p, tokenId, -1);
      const results = await readConcurrently([p.url], p.apiKey);
      assert.equal(mock.refreshRequests().length, 1, "one refresh request reached the provider");
      const fresh = mock.issued.at(-1)!.access_token;
      for (const r of results) {
        assert.equal(r.status, 200);
        assert.equal(r.body.status, "completed");
        assert.equal(r.body.token, fresh);
      }
    });
  });
}

describe("single-flight refresh across two platform processes on one PostgreSQL", () => {
  test(`${READERS} concurrent reads split over two processes: exactly one refresh at the provider`, async (t) => {
    const p = await startConnectionsPlatform(t, "postgres");
    if (!p) return;
    if (!requireCapability(t, Boolean(p.pgSchema), "PostgreSQL schema isolation")) return;
    const mock = await startMockAuthServer(t);
    const tokenId = await connected(p, mock);

    // A second, real process: `wharf up` on the same schema (search_path through the URL) and the
    // same master key (same WHARF_HOME). It shares nothing in memory with this one.
    const url = new URL(p.databaseUrl!);
    url.searchParams.set("options", `-c search_path=${p.pgSchema}`);
    const port = await freePort();
    const second = runWharf(["up"], {
      env: {
        WHARF_HOME: p.home,
        WHARF_PORT: String(port),
        DATABASE_URL: url.toString(),
        WHARF_OAUTH_SWEEP_INTERVAL_SECONDS: "0",
        WHARF_LOG_LEVEL: "warn",
      },
    });
    t.after(async () => {
      if (second.child.exitCode === null) {
        second.child.kill("SIGTERM");
        await second.exited;
      }
    });
    const otherUrl = `http://127.0.0.1:${port}`;
    await waitForOk(`${otherUrl}/ok`, 60_000).catch((err) => {
      throw new Error(`${err.message}\n${second.output()}`);
    });
    // The second process sees the same connection.
    const listed = await json(
      fetch(`${otherUrl}/v2/auth/agents/${AGENT_A}/connections`, { headers: { "x-api-key": p.apiKey } }),
    );
    assert.equal(listed.data[0].oauth_token_id, tokenId);

    mock.tokenDelayMs = 300;
    for (const [round, expiresIn] of [
      ["expired", -1],
      ["expiring in 30 s", 30],
    ] as const) {
      const before = mock.refreshRequests().length;
      await setExpiry(p, tokenId, expiresIn);
      const results = await readConcurrently([p.url, otherUrl], p.apiKey);
      assert.equal(mock.refreshRequests().length - before, 1, `${round}: exactly one refresh request`);
      for (const r of results) assert.equal(r.status, 200, JSON.stringify(r.body));
      for (const r of results) assert.equal(r.body.status, "completed");
      if (expiresIn < 0)
        assert.deepEqual(
          [...new Set(results.map((r) => r.body.token))],
          [mock.issued.at(-1)!.access_token],
          "every reader got the refreshed token",
        );
      // Afterwards both processes hand out the new token without another refresh.
      const after = await readConcurrently([p.url, otherUrl], p.apiKey);
      assert.equal(mock.refreshRequests().length - before, 1);
      assert.deepEqual([...new Set(after.map((r) => r.body.token))], [mock.issued.at(-1)!.access_token]);
    }
  });
});
