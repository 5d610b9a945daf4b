import assert from "node:assert/strict";
import { test } from "node:test";
import { SandboxClient } from "langsmith-next/sandbox";
import { KEY_PURPOSE, REPLICA_AUTH_HEADER, signRequest } from "../../src/cluster/replica-auth.ts";
import { keyringFromEnv } from "../../src/crypto/keyring.ts";
import { SecretBox } from "../../src/crypto/secret-box.ts";
import { replicaId, startReplicas } from "./support.ts";

/**
 * The internal listener replicas forward to: only requests signed with the replicas' key, for this
 * replica, for this method and target, unexpired and never seen before; and nothing in a sandbox
 * reaches it at all.
 */
test("the internal listener refuses unsigned, forged, misaddressed, expired and replayed requests, and a sandbox cannot reach it", async (t) => {
  const set = await startReplicas(t, ["a"]);
  if (!set) return;
  const [a] = set.replicas;
  const self = replicaId(a.home);
  const box = new SecretBox(keyringFromEnv(set.masterKey));
  const keyFor = () => ({ kid: box.activeKeyId, key: box.deriveKey(KEY_PURPOSE) });
  const sign = (target: string, opts: { to?: string; now?: number; method?: string } = {}) =>
    signRequest(
      keyFor,
      { from: "node-test", to: opts.to ?? self, method: opts.method ?? "GET", target },
      opts.now ?? Date.now(),
    );
  const call = (target: string, header?: string, headers: Record<string, string> = {}) =>
    fetch(`${a.internalUrl}${target}`, {
      headers: { ...(header ? { [REPLICA_AUTH_HEADER]: header } : {}), ...headers },
    });

  // Signed properly: served by the app behind it (which still asks the caller for its own credential).
  const good = sign("/v2/me");
  let res = await call("/v2/me", good, { "x-api-key": set.apiKey });
  assert.equal(res.status, 200, await res.clone().text());
  res = await call("/v2/me", sign("/v2/me"));
  assert.equal(res.status, 401, "a signed request without a user's credential is still a user request without one");

  const refusals: Array<[string, string, string | undefined]> = [
    ["no signature", "/v2/me", undefined],
    ["replayed", "/v2/me", good],
    [
      "another key",
      "/v2/me",
      signRequest(
        () => ({ kid: box.activeKeyId, key: Buffer.alloc(32, 7) }),
        { from: "node-test", to: self, method: "GET", target: "/v2/me" },
        Date.now(),
      ),
    ],
    ["another target", "/v2/workspaces", sign("/v2/me")],
    ["another method", "/v2/me", sign("/v2/me", { method: "POST" })],
    ["another replica", "/v2/me", sign("/v2/me", { to: "node-elsewhere" })],
    ["expired", "/v2/me", sign("/v2/me", { now: Date.now() - 16_000 })],
    ["far in the future", "/v2/me", sign("/v2/me", { now: Date.now() + 3_600_000 })],
    ["garbage", "/v2/me", "v1.a.b.c.d.e.f"],
  ];
  for (const [what, target, header] of refusals) {
    res = await call(target, header, { "x-api-key": set.apiKey });
    assert.equal(res.status, 401, `${what}: ${res.status}`);
    assert.match((await res.json()).detail, /Not a signed request from another replica/, what);
  }
  // The same for a WebSocket upgrade.
  const upgrade = await fetch(`${a.internalUrl}/sandboxes/dp/x/execute/ws`, {
    headers: {
      connection: "Upgrade",
      upgrade: "websocket",
      "sec-websocket-version": "13",
      "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
    },
  }).catch((e: Error) => e);
  assert.ok(!(upgrade instanceof Response) || upgrade.status === 401, "an unsigned upgrade is refused");

  // From inside a sandbox: through its proxy and around it, the internal listener is out of reach.
  const client = new SandboxClient({ apiEndpoint: `${a.url}/v2/sandboxes`, apiKey: set.apiKey, maxRetries: 0 });
  const sb = await client.createSandbox(undefined, { name: "prober" });
  const port = new URL(a.internalUrl).port;
  const probe = await sb.run(
    `for u in http://127.0.0.1:${port}/ok http://localhost:${port}/ok; do curl -s -m 5 -o /tmp/body -w '%{http_code}\\n' $u; cat /tmp/body 2>/dev/null; echo; curl -s -m 5 --noproxy '*' -o /tmp/body -w '%{http_code}\\n' $u; cat /tmp/body 2>/dev/null; echo; done`,
    { timeout: 60 },
  );
  assert.doesNotMatch(
    probe.stdout,
    /Not a signed request|"ok"/,
    `the sandbox reached the internal listener:\n${probe.stdout}`,
  );
  for (const code of probe.stdout.split("\n").filter((l) => /^\d{3}$/.test(l)))
    assert.ok(code === "000" || code === "403" || code === "502", `answered ${code}:\n${probe.stdout}`);
  await client.deleteSandbox("prober");
});
