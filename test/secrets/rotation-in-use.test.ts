import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import { describe, test } from "node:test";
import { keyringPath } from "../../src/crypto/keyring.ts";
import { startEgressSandboxPlatform } from "../egress/support/sandbox-platform.ts";
import { wharfCli } from "../support/process.ts";

const SECRET = "ghp_" + crypto.randomBytes(12).toString("hex");
const OPAQUE = "opq_" + crypto.randomBytes(12).toString("hex");
const ENV_VALUE = "env_" + crypto.randomBytes(12).toString("hex");

/**
 * Key rotation seen from a sandbox: after two rotations with the platform running, a stopped and
 * restarted sandbox (which opens its sealed environment, its opaque header value, the referenced
 * workspace secret and the workspace's interception CA again) still sends its credentials.
 */
describe("master-key rotation, seen from a sandbox", () => {
  test("headers and environment survive two rotations and a sandbox restart", async (t) => {
    const p = await startEgressSandboxPlatform(t);
    if (!p) return;
    assert.equal(
      (await p.api("/v2/secrets", { method: "PUT", json: [{ key: "GH_TOKEN", value: SECRET }] })).status,
      200,
    );
    const proxy_config = {
      rules: [
        {
          name: "gh",
          match_hosts: ["api.test"],
          headers: [{ name: "Authorization", type: "workspace_secret", value: "token {GH_TOKEN}" }],
        },
        { name: "other", match_hosts: ["other.test"], headers: [{ name: "X-Key", type: "opaque", value: OPAQUE }] },
      ],
      access_control: { allow_list: ["api.test", "other.test"] },
    };
    const sbx = await p.create({
      name: "rotation",
      proxy_config,
      env_vars: { PLANTED_ENV: ENV_VALUE },
      wait_for_ready: true,
    });
    const check = async () => {
      const sh = async (cmd: string) => {
        const r = await p.exec(sbx, cmd, { timeout: 30 });
        assert.equal(r.status, 200, JSON.stringify(r.body));
        return r.body as { stdout: string; stderr: string };
      };
      let r = await sh("curl -sS --max-time 10 https://api.test/a");
      assert.equal(JSON.parse(r.stdout).headers.authorization, `token ${SECRET}`, r.stderr);
      r = await sh("curl -sS --max-time 10 https://other.test/b");
      assert.equal(JSON.parse(r.stdout).headers["x-key"], OPAQUE, r.stderr);
      r = await sh('printf %s "$PLANTED_ENV"');
      assert.equal(r.stdout, ENV_VALUE);
    };
    await check();

    const env = { WHARF_HOME: p.home, DATABASE_URL: "" };
    for (let i = 0; i < 2; i++) {
      const { code, out } = await wharfCli(["secrets", "rotate-key"], { env });
      assert.equal(code, 0, out);
      assert.match(out, /dropped unused key/, out);
    }
    const ring = JSON.parse(fs.readFileSync(keyringPath(p.home), "utf8"));
    assert.deepEqual(Object.keys(ring.keys), [ring.active]);

    // Stop and start: the sandbox's sealed values are opened again, under the new key only.
    assert.equal((await p.api("/v2/sandboxes/boxes/rotation/stop", { method: "POST" })).status, 204);
    assert.equal((await p.api("/v2/sandboxes/boxes/rotation/start", { method: "POST" })).status, 202);
    const deadline = Date.now() + 30_000;
    for (;;) {
      const st = await (await p.api("/v2/sandboxes/boxes/rotation/status")).json();
      if (st.status === "ready") break;
      assert.ok(Date.now() < deadline && st.status !== "failed", `sandbox is ${st.status}: ${st.status_message}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    await check();
  });
});
