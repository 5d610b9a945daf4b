import assert from "node:assert/strict";
import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { startSandboxPlatform } from "../sandboxes/support.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { startH2Upstream } from "./fixtures/h2-upstream.ts";
import { startUpstreams, useUpstreamsForEgress } from "./support/upstreams.ts";

const SECRET = "h2m_" + crypto.randomBytes(16).toString("hex");

interface Probe {
  status: number;
  ms: number;
  error?: string;
  body?: string;
}

/**
 * Malformed HTTP/2 from inside a real sandbox (captured connections, the supervised data plane):
 * a bad preface, an oversized header list, a rapid-reset flood and a CONTINUATION flood each end
 * that connection only; healthy sessions of the same sandbox, to the same host and to another, answer
 * before, during and after every one of them, with the credential injected, and the data plane never
 * restarts. (The flood's resets once reached the HTTP/2 upstream in the thousands, whose own limit
 * then ended the upstream connection the sandbox's request to the same host shared: a 502.)
 */
test("malformed HTTP/2 from inside a sandbox closes that connection only; the sandbox's healthy sessions keep working", async (t) => {
  if (!requireCapability(t, process.platform === "linux" && isRoot(), "sandboxes need root on Linux")) return;
  const up = await startUpstreams(t, ["api.test"]);
  const h2 = await startH2Upstream(t, up, ["h2.test", "other.test"]);
  const hosts = ["h2.test", "other.test"].map((n) => `${n}:443=${up.address}:${h2.port}`).join(",");
  useUpstreamsForEgress(up, { hosts });
  const p = await startSandboxPlatform(t);
  if (!p) return;
  const proxy_config = {
    rules: [
      {
        name: "h2",
        match_hosts: ["h2.test", "other.test"],
        headers: [{ name: "Authorization", type: "plaintext", value: `Bearer ${SECRET}` }],
      },
    ],
  };
  const sbx = await p.create({ name: "h2-malformed", proxy_config, wait_for_ready: true });
  const form = new FormData();
  form.append(
    "file",
    new Blob([fs.readFileSync(path.join(import.meta.dirname, "fixtures/h2-malformed-in-sandbox.mjs"))]),
    "h2m.mjs",
  );
  const upload = await fetch(`${sbx.dataplane_url}/upload?path=/tmp/h2m.mjs`, {
    method: "POST",
    headers: { "x-api-key": p.apiKey },
    body: form,
  });
  assert.equal(upload.status, 200, await upload.clone().text());

  const r = await p.exec(sbx, "node /tmp/h2m.mjs h2.test other.test", { timeout: 55 });
  assert.equal(r.status, 200, JSON.stringify(r.body));
  assert.equal(r.body.exit_code, 0, r.body.stderr);
  const out = JSON.parse(r.body.stdout) as {
    attacks: Record<string, any>;
    healthy: Array<{ what: string; same: Probe; other: Probe }>;
  };
  const timings = out.healthy
    .map((h) => `${h.what}=${h.same.status}/${h.same.ms}ms,${h.other.status}/${h.other.ms}ms`)
    .join(" ");
  console.log(`inside the sandbox: ${JSON.stringify(out.attacks)}; healthy (same host, other host): ${timings}`);

  assert.equal(out.attacks.preface.closed, true, "a bad preface closes that connection");
  assert.notEqual(out.attacks.oversized.status, 200, "an oversized header list is refused");
  assert.equal(
    out.attacks.rapidReset.destroyed,
    true,
    `a rapid-reset flood closes that connection: ${JSON.stringify(out.attacks.rapidReset)}`,
  );
  // How many pairs the flood got written depends on the kernel's buffers and the machine's load (all
  // 20,000 fit); what matters is what the proxy did with them: cut the connection, relay almost none.
  const floodUpstream = h2.seen.filter((s) => s.headers[":path"] === "/").length;
  assert.ok(
    floodUpstream < 1_000,
    `the reset streams were not relayed: ${floodUpstream} of ${out.attacks.rapidReset.pairs} reached the upstream`,
  );
  assert.equal(out.attacks.continuation.closed, true, "a CONTINUATION flood closes that connection");
  assert.ok(out.attacks.continuation.frames < 20_000, "…before it ran its course");
  assert.deepEqual(
    out.healthy.map((h) => h.what),
    ["start", "preface", "oversized", "mid-rapid-reset", "rapid-reset", "continuation"],
  );
  for (const h of out.healthy) {
    assert.equal(
      h.other.status,
      200,
      `the sandbox's session to another host after ${h.what}: ${JSON.stringify(h.other)}`,
    );
    assert.equal(
      h.same.status,
      200,
      `the sandbox's healthy session to the same host after ${h.what}: ${JSON.stringify(h.same)}`,
    );
  }

  const healthySeen = h2.seen.filter((s) => String(s.headers[":path"]).startsWith("/healthy/"));
  assert.equal(healthySeen.length, 2 * out.healthy.length);
  assert.ok(
    healthySeen.every((s) => s.headers.authorization === `Bearer ${SECRET}`),
    "every healthy request got the credential",
  );
  assert.ok(!h2.seen.some((s) => s.headers[":path"] === "/big"), "the oversized request never went upstream");
  assert.ok(!/data plane (exited|crashed)|taking over/i.test(p.logs()), "the data plane never restarted");
});
