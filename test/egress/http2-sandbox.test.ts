import assert from "node:assert/strict";
import crypto from "node:crypto";
import { test } from "node:test";
import { startSandboxPlatform } from "../sandboxes/support.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { startH2Upstream } from "./fixtures/h2-upstream.ts";
import { hostsSetting, startUpstreams, useUpstreamsForEgress } from "./support/upstreams.ts";

const SECRET = "h2_" + crypto.randomBytes(16).toString("hex");

interface Case {
  name: string;
  /** curl arguments after `curl -sS --max-time 10 --http2`. */
  args: string;
  status: string;
  /** The HTTP version curl negotiated with the proxy ("0" when nothing was negotiated). */
  version: string;
  /** Whether an upstream request is expected, and then with the credential. */
  upstream: "injected" | "plain" | "none";
  body?: RegExp;
  exit?: number;
}

/**
 * `curl --http2` from inside a real sandbox through interception, explicit (HTTPS_PROXY) and by
 * transparent capture: HTTP/2 negotiated with the proxy (ALPN h2) and offered upstream, the header
 * rule applied, `:authority` verified. The escape checks of the HTTP/1.1 path hold over HTTP/2: an
 * `:authority` naming another host (domain fronting), an SNI naming another host, a deny-listed host
 * (even one a rule names) and HTTP/2 in clear text never get a credential nor reach upstream.
 */
test("curl --http2 from inside a sandbox: h2 negotiated, rule applied, :authority verified, escapes refused", async (t) => {
  if (!requireCapability(t, process.platform === "linux" && isRoot(), "sandboxes need root on Linux")) return;
  const up = await startUpstreams(t, ["api.test"]);
  const h2 = await startH2Upstream(t, up, ["h2.test", "other.test", "denied.test"]);
  const hosts = [
    hostsSetting(up, ["api.test"]),
    ...["h2.test", "other.test", "denied.test"].map((n) => `${n}:443=${up.address}:${h2.port}`),
  ].join(",");
  useUpstreamsForEgress(up, { hosts });
  const p = await startSandboxPlatform(t);
  if (!p) return;
  assert.equal((await p.api("/v2/secrets", { method: "PUT", json: [{ key: "H2_TOKEN", value: SECRET }] })).status, 200);
  const proxy_config = {
    // The rule names the denied host too: access control must win over injection.
    rules: [
      {
        name: "h2",
        match_hosts: ["h2.test", "api.test", "denied.test"],
        headers: [{ name: "Authorization", type: "workspace_secret", value: "Bearer {H2_TOKEN}" }],
      },
    ],
    access_control: { deny_list: ["denied.test"] },
  };
  const sbx = await p.create({ name: "h2-e2e", proxy_config, wait_for_ready: true });
  const curlIn = async (args: string) => {
    const r = await p.exec(
      sbx,
      `curl -sS --max-time 10 --http2 -w '\\n%{http_code} %{http_version}' ${args}; echo " exit=$?"`,
      { timeout: 30 },
    );
    assert.equal(r.status, 200, JSON.stringify(r.body));
    const out = r.body as { stdout: string; stderr: string };
    const m = /\n(\d{3}) (\S+) exit=(\d+)\n?$/.exec(out.stdout);
    assert.ok(m, `unexpected curl output: ${out.stdout} ${out.stderr}`);
    return { body: out.stdout.slice(0, m.index), status: m[1], version: m[2], exit: Number(m[3]), stderr: out.stderr };
  };

  // The data plane's process starts with the first sandbox: on a loaded machine that can take
  // longer than one client's timeout, so wait for it once (any answer from the proxy will do).
  const warm = await p.exec(sbx, "curl -s --max-time 55 -o /dev/null -w '%{http_code}' http://warmup.test/", {
    timeout: 60,
  });
  assert.match(String(warm.body?.stdout), /^[1-5]\d\d$/, `the egress proxy answers: ${JSON.stringify(warm.body)}`);
  const cases: Case[] = [
    {
      name: "explicit proxy (CONNECT)",
      args: "https://h2.test/v1/explicit",
      status: "200",
      version: "2",
      upstream: "injected",
    },
    {
      name: "transparent capture",
      args: "--noproxy '*' https://h2.test/v1/captured",
      status: "200",
      version: "2",
      upstream: "injected",
    },
    {
      name: "a body streams up over h2",
      args: "--noproxy '*' --data-binary 'hello h2' https://h2.test/v1/post",
      status: "200",
      version: "2",
      upstream: "injected",
      body: /"body":"hello h2"/,
    },
    { name: "a host without a rule", args: "https://other.test/plain", status: "200", version: "2", upstream: "plain" },
    {
      name: ":authority naming another host (explicit)",
      args: "-H 'Host: h2.test' https://other.test/fronted",
      status: "421",
      version: "2",
      upstream: "none",
      body: /does not match the destination/,
    },
    {
      name: ":authority naming another host (captured)",
      args: "--noproxy '*' -H 'Host: h2.test' https://other.test/fronted",
      status: "421",
      version: "2",
      upstream: "none",
      body: /does not match the destination/,
    },
    {
      name: ":authority with another port",
      args: "--noproxy '*' -H 'Host: h2.test:8443' https://h2.test/port",
      status: "421",
      version: "2",
      upstream: "none",
    },
    {
      name: "SNI naming another host than the destination",
      args: "--noproxy '*' --connect-to h2.test:443:other.test:443 https://h2.test/sni",
      status: "000",
      version: "0",
      upstream: "none",
      exit: 35,
    },
    {
      name: "a deny-listed host a rule names",
      args: "https://denied.test/x",
      status: "403",
      version: "2",
      upstream: "none",
      body: /deny_list entry denied\.test/,
    },
    {
      name: "a deny-listed host (captured)",
      args: "--noproxy '*' https://denied.test/x",
      status: "403",
      version: "2",
      upstream: "none",
      body: /deny_list/,
    },
  ];
  for (const c of cases) {
    const before = h2.seen.length;
    const r = await curlIn(c.args);
    const what = `${c.name}: ${r.status} ${r.version} exit=${r.exit} ${r.body.slice(0, 200)} ${r.stderr}`;
    assert.equal(r.status, c.status, what);
    assert.equal(r.version, c.version, what);
    if (c.exit !== undefined) assert.equal(r.exit, c.exit, what);
    if (c.body) assert.match(r.body, c.body, what);
    const reached = h2.seen.slice(before);
    if (c.upstream === "none") {
      assert.equal(reached.length, 0, what);
      assert.ok(!r.body.includes(SECRET) && !r.stderr.includes(SECRET), `${c.name}: no credential in the refusal`);
      continue;
    }
    assert.equal(reached.length, 1, what);
    const host = /https:\/\/([^/]+)/.exec(c.args)![1];
    assert.equal(reached[0].headers[":authority"], host, `${c.name}: upstream :authority is the verified destination`);
    assert.equal(reached[0].headers[":scheme"], "https");
    assert.equal(reached[0].headers.authorization, c.upstream === "injected" ? `Bearer ${SECRET}` : undefined, what);
  }

  // HTTP/2 in clear text is never spoken to the sandbox: prior knowledge on port 80 and an h2c
  // upgrade are refused; nothing upstream, no credential.
  const before = up.seen.length;
  const prior = await curlIn("--noproxy '*' --http2-prior-knowledge http://api.test/prior");
  assert.notEqual(prior.status, "200", `prior knowledge: ${JSON.stringify(prior)}`);
  const upgrade = await curlIn("--noproxy '*' http://api.test/h2c");
  assert.equal(upgrade.status, "400", `h2c upgrade: ${JSON.stringify(upgrade)}`);
  assert.equal(up.seen.length, before, "nothing reached the upstream");

  console.log(
    `prior knowledge: ${prior.status} exit=${prior.exit} ${prior.stderr.trim()}; h2c upgrade: ${upgrade.status} ${upgrade.body.trim()}`,
  );
  const log = await (await p.api("/v2/sandboxes/boxes/h2-e2e/egress-log?limit=200")).json();
  const entries = log.entries as Array<{ kind: string; rule?: string; host: string; reason?: string }>;
  assert.ok(entries.some((e) => e.kind === "inject" && e.rule === "h2" && e.host === "h2.test"));
  assert.ok(
    entries.some((e) => e.kind === "block" && /TLS server name "h2.test" does not match/.test(e.reason ?? "")),
    JSON.stringify(entries),
  );
  assert.ok(
    entries.some(
      (e) => e.kind === "block" && e.host === "other.test" && /Host "h2.test" does not match/.test(e.reason ?? ""),
    ),
  );
  assert.ok(!entries.some((e) => e.kind === "inject" && e.host !== "h2.test"));
  assert.ok(!JSON.stringify(log).includes(SECRET));
});
