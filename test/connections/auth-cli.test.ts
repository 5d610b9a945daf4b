import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { describe, test } from "node:test";
import { runWharf, WHARF_BIN, wharfCli } from "../support/process.ts";
import { Browser } from "./support/browser.ts";
import { startMockAuthServer } from "./support/mock-oauth.ts";
import { startConnectionsPlatform } from "./support/platform.ts";
import { AGENT_A } from "./support/seed.ts";

describe("wharf auth CLI", () => {
  test("providers add (secret on stdin) → connect prints the URL and waits → connections lists it", async (t) => {
    const p = (await startConnectionsPlatform(t, "sqlite"))!;
    const mock = await startMockAuthServer(t);
    const env = { WHARF_URL: p.url, WHARF_API_KEY: p.apiKey };

    const add = spawn(
      process.execPath,
      [
        WHARF_BIN,
        "auth",
        "providers",
        "add",
        "mock",
        "--client-id",
        "mock-client",
        "--auth-url",
        `${mock.url}/authorize`,
        "--token-url",
        `${mock.url}/token`,
        "--revocation-url",
        `${mock.url}/revoke`,
        "--userinfo-url",
        `${mock.url}/userinfo`,
        "--client-secret-stdin",
        "--param",
        "prompt=consent",
      ],
      { env: { ...process.env, ...env } },
    );
    let out = "";
    add.stdout.on("data", (d) => (out += d));
    add.stderr.on("data", (d) => (out += d));
    add.stdin.end("cli-client-secret\n");
    const code = await new Promise((r) => add.on("exit", r));
    assert.equal(code, 0, out);
    assert.match(out, new RegExp(`${p.url}/v2/auth/callback/mock`));

    // Each CLI start costs seconds on a loaded machine: independent commands run side by side.
    const connect = runWharf(
      ["auth", "connect", "mock", "--agent", AGENT_A, "--scopes", "repo,user", "--timeout", "90"],
      { env },
    );
    const listing = wharfCli(["auth", "providers", "list"], { env });
    const deadline = Date.now() + 60_000;
    let url: string | undefined;
    while (!url && Date.now() < deadline) {
      url = /(http:\/\/\S+\/authorize\?\S+)/.exec(connect.output())?.[1];
      if (!url) await new Promise((res) => setTimeout(res, 50));
    }
    assert.ok(url, connect.output());
    assert.match(url, /prompt=consent/);
    assert.equal((await new Browser().open(url)).status, 200);
    assert.equal(await connect.exited, 0, connect.output());
    assert.match(connect.output(), /connected mock as john@example\.test to agent/);
    assert.equal(mock.tokenRequests[0].client_secret, "cli-client-secret");

    let r = await listing;
    assert.equal(r.code, 0, r.out);
    assert.match(r.out, /mock\s+mock\s+mock-client\s+client_secret_post\s+true/);

    const [conns, again, bad] = await Promise.all([
      wharfCli(["auth", "connections", AGENT_A], { env }),
      wharfCli(["auth", "connect", "mock", "--agent", AGENT_A, "--scopes", "repo"], { env }),
      wharfCli(["auth", "connections", "not-a-uuid"], { env }),
    ]);
    assert.equal(conns.code, 0, conns.out);
    assert.match(conns.out, /mock\s+john@example\.test\s+repo user/);
    assert.match(again.out, /already connected/);
    assert.equal(bad.code, 1);
    assert.match(bad.out, /422: path\.agent_id: Input should be a valid UUID/);

    const tokenId = /token ([0-9a-f-]{36})/.exec(connect.output())![1];
    r = await wharfCli(["auth", "disconnect", tokenId], { env });
    assert.equal(r.code, 0, r.out);
    assert.equal(mock.revocations.length, 2);
    assert.deepEqual(await (await p.api("/v2/auth/tokens")).json(), []);
  });
});
