import assert from "node:assert/strict";
import crypto from "node:crypto";
import { describe, test } from "node:test";
import { currentEgressRuntime } from "../../src/egress/egress-runtime.ts";
import { SupervisedDataPlane } from "../../src/egress/supervisor/supervised-data-plane.ts";
import { startEgressSandboxPlatform } from "./support/sandbox-platform.ts";

const SECRET = "ghp_" + crypto.randomBytes(16).toString("hex");
const OPAQUE = "opq_" + crypto.randomBytes(16).toString("hex");

/**
 * From inside a real sandbox (the sandboxes feature's local driver, which calls attachEgress):
 * unmodified curl, python3 and Node fetch reach loopback upstreams only through the proxy, with
 * credentials injected that never enter the sandbox.
 */
describe("egress from inside a real sandbox", () => {
  test("create with proxy_config, clients inject, PATCH applies live, egress-log lists, no credential in the sandbox", async (t) => {
    const p = await startEgressSandboxPlatform(t);
    if (!p) return;
    let res = await p.api("/v2/secrets", { method: "PUT", json: [{ key: "GH_TOKEN", value: SECRET }] });
    assert.equal(res.status, 200);
    const proxy_config = {
      rules: [
        {
          name: "gh",
          match_hosts: ["api.test"],
          match_paths: ["/v1/*"],
          headers: [{ name: "Authorization", type: "workspace_secret", value: "token {GH_TOKEN}" }],
        },
        { name: "other", match_hosts: ["other.test"], headers: [{ name: "X-Key", type: "opaque", value: OPAQUE }] },
      ],
      access_control: { allow_list: ["api.test", "other.test", "raw.test:8443"] },
    };
    const sbx = await p.create({ name: "egress-e2e", proxy_config, wait_for_ready: true });
    assert.equal(sbx.status, "ready", JSON.stringify(sbx));
    assert.deepEqual(sbx.proxy_config.rules[1].headers[0], { name: "X-Key", type: "opaque", is_set: true });
    const sh = async (cmd: string) => {
      const r = await p.exec(sbx, cmd, { timeout: 30 });
      assert.equal(r.status, 200, JSON.stringify(r.body));
      return r.body as { stdout: string; stderr: string; exit_code: number };
    };

    let r = await sh("curl -sS --max-time 10 https://api.test/v1/curl");
    console.log(`inside the sandbox, curl saw: ${r.stdout.slice(0, 120)}…`);
    assert.equal(JSON.parse(r.stdout).headers.authorization, `token ${SECRET}`, r.stderr);
    r = await sh("curl -sS --max-time 10 --noproxy '*' http://other.test/plain");
    assert.equal(JSON.parse(r.stdout).headers["x-key"], OPAQUE, r.stderr);
    r = await sh(
      `python3 -c "import urllib.request,json;print(json.loads(urllib.request.urlopen('https://api.test/v1/py',timeout=10).read())['headers']['authorization'])"`,
    );
    assert.equal(r.stdout.trim(), `token ${SECRET}`, r.stderr);
    r = await sh(
      `node -e "fetch('https://api.test/v1/node').then(r=>r.json()).then(j=>console.log(j.headers.authorization)).catch(e=>{console.error(e.cause??e);process.exit(1)})"`,
    );
    assert.equal(r.stdout.trim(), `token ${SECRET}`, r.stderr);
    r = await sh("curl -sS --max-time 10 -o /dev/null -w '%{http_code}' https://blocked.test/");
    assert.equal(r.stdout, "403");
    r = await sh("curl -sS --max-time 5 telnet://api.test:22 </dev/null; echo exit=$?");
    assert.match(r.stdout, /exit=(7|56)/, "raw TCP to a port not allow-listed is refused");

    // No credential anywhere in the sandbox: environment, its files (home, /etc, /tmp, /usr/local).
    r = await sh(
      `env; grep -rIl -e '${SECRET}' -e '${OPAQUE}' /etc /root /home /tmp /usr/local /workspace 2>/dev/null; true`,
    );
    assert.ok(!r.stdout.includes(SECRET) && !r.stdout.includes(OPAQUE), "no credential in the sandbox");

    // PATCH applies at once, without a restart.
    res = await p.api("/v2/sandboxes/boxes/egress-e2e", {
      method: "PATCH",
      json: {
        proxy_config: {
          rules: [
            {
              name: "gh2",
              match_hosts: ["api.test"],
              headers: [{ name: "Authorization", type: "plaintext", value: "token rotated" }],
            },
          ],
          access_control: { allow_list: ["api.test"] },
        },
      },
    });
    assert.equal(res.status, 200, await res.clone().text());
    r = await sh("curl -sS --max-time 10 https://api.test/v2/after-patch");
    assert.equal(JSON.parse(r.stdout).headers.authorization, "token rotated");
    r = await sh("curl -sS --max-time 10 -o /dev/null -w '%{http_code}' https://other.test/");
    assert.equal(r.stdout, "403", "other.test left the allow_list");

    res = await p.api("/v2/sandboxes/boxes/egress-e2e/egress-log?limit=100");
    assert.equal(res.status, 200);
    const log = await res.json();
    assert.ok(log.entries.some((e: any) => e.kind === "inject" && e.rule === "gh" && e.host === "api.test"));
    assert.ok(log.entries.some((e: any) => e.kind === "inject" && e.rule === "gh2"));
    assert.ok(log.entries.some((e: any) => e.kind === "block" && e.host === "blocked.test"));
    assert.ok(!JSON.stringify(log).includes(SECRET) && !JSON.stringify(log).includes(OPAQUE));
    assert.equal((await p.api("/v2/sandboxes/boxes/nope/egress-log")).status, 404);
    assert.ok(!p.logs().includes(SECRET) && !p.logs().includes(OPAQUE), "no credential in the platform's logs");
  });

  test("the data plane killed with SIGKILL: the sandbox's listeners are accepted on by the next process at once (capture, explicit proxy)", async (t) => {
    const p = await startEgressSandboxPlatform(t);
    if (!p) return;
    const proxy_config = {
      rules: [
        {
          name: "api",
          match_hosts: ["api.test"],
          headers: [{ name: "Authorization", type: "opaque", value: `Bearer ${OPAQUE}` }],
        },
      ],
    };
    const sbx = await p.create({ name: "egress-crash", proxy_config, wait_for_ready: true });
    const plane = currentEgressRuntime()!.plane;
    assert.ok(plane instanceof SupervisedDataPlane, "the platform runs the data plane in its own process");
    // 80, 443 and the explicit proxy port, taken over by the serving process.
    for (let i = 0; i < 250 && plane.heldListeners < 3; i++) await new Promise((r) => setTimeout(r, 20));
    assert.ok(
      plane.heldListeners >= 3,
      `the serving process accepts on the sandbox's listeners (${plane.heldListeners})`,
    );
    const passed = plane.passed;
    const pid = plane.pid!;
    process.kill(pid, "SIGKILL");
    // Both requests start at once: their connections wait in the listeners' queues for the next process.
    const r = await p.exec(
      sbx,
      "curl -sS --max-time 10 --noproxy '*' https://api.test/after-capture & curl -sS --max-time 10 https://api.test/after-proxy; wait",
      { timeout: 30 },
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const seen = (r.body as { stdout: string; stderr: string }).stdout
      .split(/(?<=})\s*(?={)/)
      .map((j) => JSON.parse(j));
    assert.deepEqual(
      seen.map((j) => j.headers.authorization),
      [`Bearer ${OPAQUE}`, `Bearer ${OPAQUE}`],
      (r.body as { stderr: string }).stderr,
    );
    assert.notEqual(plane.pid, pid, "another process serves");
    assert.equal(plane.passed, passed, "the control plane accepted none of them");
  });
});
