import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, test } from "node:test";
import { describeRefusal, refusalAdvice } from "../../src/egress/audit/refusals.ts";
import { hostsSetting, startUpstreams } from "../egress/support/upstreams.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { EGRESS_FIXTURES, startEgressPlatform, startLocalRegistry } from "./egress-support.ts";
import { logsOf, pollRevision } from "./support.ts";

test("refusalAdvice: the setting that would allow each kind of refusal", () => {
  const rows: Array<[reason: string, host: string, port: number, want: RegExp | null]> = [
    [
      "registry.corp resolves to 10.1.2.3: internal address (private)",
      "registry.corp",
      443,
      /WHARF_EGRESS_ALLOW_INTERNAL \(for example 10\.1\.2\.3\/32\)/,
    ],
    [
      "fd00::5: internal address (unique-local)",
      "fd00::5",
      443,
      /WHARF_EGRESS_ALLOW_INTERNAL \(for example fd00::5\/128\)/,
    ],
    [
      "not in allow_list (203.0.113.9:443)",
      "pypi.org",
      443,
      /"pypi\.org" in the deployment's proxy_config\.access_control\.allow_list/,
    ],
    ["not in allow_list (203.0.113.9:8443)", "git.corp", 8443, /"git\.corp:8443"/],
    ["denied by deny_list entry *.npmjs.org", "registry.npmjs.org", 443, /deny_list/],
    [
      "upstream certificate rejected (UNABLE_TO_GET_ISSUER_CERT_LOCALLY)",
      "registry.corp",
      443,
      /WHARF_EGRESS_SYSTEM_CA_FILE.*WHARF_EGRESS_UPSTREAM_CA_FILE/,
    ],
    ["cannot resolve mirror.corp (ENOTFOUND)", "mirror.corp", 443, /WHARF_EGRESS_HOSTS \(mirror\.corp=<address>\)/],
    ["upstream connection failed (ECONNREFUSED)", "x.test", 443, null],
  ];
  for (const [reason, host, port, want] of rows) {
    const got = refusalAdvice({ reason, host, port });
    if (want) assert.match(got ?? "", want, reason);
    else assert.equal(got, null, reason);
  }
  assert.equal(
    describeRefusal({
      decision: "blocked",
      method: "GET",
      host: "pypi.org",
      port: 443,
      path: "/simple/x/",
      reason: "not in allow_list (203.0.113.9:443)",
    }),
    `egress refused GET pypi.org:443/simple/x/: not in allow_list (203.0.113.9:443); allowed by "pypi.org" in the deployment's proxy_config.access_control.allow_list`,
  );
});

/**
 * Builds behind a registry the proxy refuses: a registry whose name resolves to an internal
 * address (npm: 403) and one whose certificate the proxy does not trust (npm: 502, retried for
 * minutes). Either fails the build within seconds, naming the decision and the setting.
 */
describe("a build step whose registry requests the egress proxy refuses", () => {
  test("fails within seconds, and the build log and status say which host, why, and which setting allows it", async (t) => {
    if (!requireCapability(t, process.platform === "linux" && isRoot(), "confined deployments need root on Linux"))
      return;
    const up = await startUpstreams(t);
    const registry = await startLocalRegistry(t, {
      packageDir: path.join(EGRESS_FIXTURES, "registry-package"),
      publicUrl: "http://registry.test/",
      address: "127.0.0.3",
    });
    Object.assign(process.env, {
      WHARF_EGRESS_HOSTS: `${hostsSetting(up)},registry.test:80=${registry.address}:${registry.port}`,
      // The upstreams' address is reachable, the registry's is not; the upstreams' CA is trusted nowhere.
      WHARF_EGRESS_ALLOW_INTERNAL: `${up.address}/32`,
      WHARF_EGRESS_SYSTEM_CA_FILE: "none",
      WHARF_EGRESS_SYSTEM_DNS: "0",
    });
    delete process.env.WHARF_EGRESS_UPSTREAM_CA_FILE;
    const p = (await startEgressPlatform(t))!;

    const deploy = async (name: string, npmrc: string) => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-proj-refused-"));
      t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
      fs.cpSync(path.join(EGRESS_FIXTURES, "project"), dir, { recursive: true });
      fs.writeFileSync(path.join(dir, ".npmrc"), npmrc);
      const started = performance.now();
      const res = await p.api("/v2/deployments", {
        method: "POST",
        json: {
          name,
          source: "internal_source",
          source_config: {},
          source_revision_config: { langgraph_config_path: "langgraph.json", local_path: dir },
          secrets: [],
        },
      });
      assert.equal(res.status, 201, await res.clone().text());
      const d = await res.json();
      const rev = await pollRevision(p, d.id, d.latest_revision_id, 120_000);
      return { rev, ms: performance.now() - started, log: await logsOf(p, d.id, rev.id, "build") };
    };

    // The registry's name resolves to an internal address: npm answers 403 at once.
    const internal = await deploy("internal-mirror", "registry=http://registry.test/\n");
    console.log(`refused registry (internal address): BUILD_FAILED after ${Math.round(internal.ms)} ms`);
    assert.equal(internal.rev.status, "BUILD_FAILED");
    assert.match(
      internal.rev.status_message ?? "",
      /egress refused GET registry\.test:80\/wharf-egress-fixture: registry\.test resolves to 127\.0\.0\.3: internal address/,
    );
    assert.match(internal.rev.status_message ?? "", /WHARF_EGRESS_ALLOW_INTERNAL \(for example 127\.0\.0\.3\/32\)/);
    assert.match(internal.log, /egress refused GET registry\.test:80.*WHARF_EGRESS_ALLOW_INTERNAL/);
    assert.equal(registry.seen.length, 0, "nothing reached the registry");
    assert.ok(internal.ms < 60_000, `failed after ${internal.ms} ms`);

    // A registry whose certificate the proxy does not trust: npm retries its 502s, the build stops it.
    const untrusted = await deploy("untrusted-mirror", "registry=https://api.test/\n");
    console.log(`untrusted registry certificate: BUILD_FAILED after ${Math.round(untrusted.ms)} ms`);
    assert.equal(untrusted.rev.status, "BUILD_FAILED");
    assert.match(
      untrusted.rev.status_message ?? "",
      /egress failed GET api\.test:443\/wharf-egress-fixture: upstream certificate rejected/,
    );
    assert.match(untrusted.rev.status_message ?? "", /WHARF_EGRESS_SYSTEM_CA_FILE/);
    assert.match(untrusted.log, /upstream certificate rejected/);
    assert.ok(untrusted.ms < 60_000, `failed after ${untrusted.ms} ms (npm alone retries for minutes)`);
  });
});
