import assert from "node:assert/strict";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { test } from "node:test";
import {
  NO_HOST_REGISTRIES,
  parseNpmConfigGet,
  parsePipConfigList,
  readHostRegistries,
  type HostRegistries,
} from "../../src/deployments/build/host-registries.ts";
import { buildRegistryPlan } from "../../src/deployments/build/registry-hosts.ts";
import { buildStepProxyConfig } from "../../src/deployments/confinement/egress-plan.ts";
import { buildRefusalAdvice } from "../../src/deployments/runtime/egress-refusals.ts";
import { notifyRefusal, watchDistinctRefusals } from "../../src/egress/audit/refusals.ts";
import { canonicalHost } from "../../src/egress/policy/canonical-host.ts";
import { CidrSet } from "../../src/egress/policy/address-class.ts";
import { SandboxPolicy } from "../../src/egress/policy/policy.ts";

test("parseNpmConfigGet: registry and cafile, null when unset", () => {
  assert.deepEqual(parseNpmConfigGet("registry=https://npm.corp/\ncafile=/etc/corp-ca.pem\n"), {
    registry: "https://npm.corp/",
    cafile: "/etc/corp-ca.pem",
  });
  assert.deepEqual(parseNpmConfigGet("registry=https://registry.npmjs.org/\ncafile=null\n"), {
    registry: "https://registry.npmjs.org/",
    cafile: null,
  });
  assert.deepEqual(parseNpmConfigGet(""), { registry: null, cafile: null });
});

test("parsePipConfigList: the environment over [install] over [global]; extra-index-url is a list", () => {
  const rows: Array<[string, HostRegistries["pip"]]> = [
    [
      "global.index-url='https://pypi.corp/simple'\nglobal.cert='/etc/corp-ca.pem'",
      { indexUrl: "https://pypi.corp/simple", extraIndexUrls: [], cert: "/etc/corp-ca.pem" },
    ],
    [
      "global.index-url='https://a/simple'\ninstall.index-url='https://b/simple'\n:env:.index-url='https://c/simple'",
      { indexUrl: "https://c/simple", extraIndexUrls: [], cert: null },
    ],
    [
      "global.extra-index-url='https://x/simple https://y/simple'",
      { indexUrl: null, extraIndexUrls: ["https://x/simple", "https://y/simple"], cert: null },
    ],
    ["", NO_HOST_REGISTRIES.pip],
  ];
  for (const [out, want] of rows) assert.deepEqual(parsePipConfigList(out), want, out);
});

test("readHostRegistries: what the host's npm reports for the platform's user (a user config of the test's)", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-npmrc-"));
  try {
    fs.writeFileSync(path.join(dir, "npmrc"), "registry=https://npm-mirror.test/\ncafile=/tmp/company-ca.pem\n");
    // As an operator's shell has it: under `npm test`, npm's own npm_config_* (its userconfig, a global cafile) would outrank the test's.
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_config_/i.test(k)));
    const got = await readHostRegistries({ ...env, NPM_CONFIG_USERCONFIG: path.join(dir, "npmrc") });
    assert.deepEqual(got.npm, { registry: "https://npm-mirror.test/", cafile: "/tmp/company-ca.pem" });
    const viaEnv = await readHostRegistries({
      ...env,
      NPM_CONFIG_USERCONFIG: path.join(dir, "npmrc"),
      NPM_CONFIG_REGISTRY: "https://other.test/",
    });
    assert.equal(viaEnv.npm.registry, "https://other.test/", "NPM_CONFIG_REGISTRY wins, as npm ranks it");
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

test("buildRegistryPlan: the host's registries unless the step or project names one; only the host's may be internal", () => {
  const host: HostRegistries = {
    npm: { registry: "https://npm.corp/", cafile: "/etc/corp-ca.pem" },
    pip: {
      indexUrl: "https://pypi.corp/simple",
      extraIndexUrls: ["file:///opt/wheels", "https://extra.corp:8443/simple"],
      cert: "/etc/pip-ca.pem",
    },
  };
  const rows: Array<{
    name: string;
    npmrc?: string;
    env?: Record<string, string>;
    python?: boolean;
    allowInternal?: boolean;
    want: Partial<ReturnType<typeof buildRegistryPlan>>;
  }> = [
    {
      name: "host npm registry",
      want: {
        env: { npm_config_registry: "https://npm.corp/" },
        allow: ["npm.corp"],
        hostEntries: ["npm.corp"],
        internal: [],
        caFiles: ["/etc/corp-ca.pem"],
      },
    },
    { name: "allowed internal", allowInternal: true, want: { internal: ["npm.corp"] } },
    {
      name: "project .npmrc wins and is never internal",
      npmrc: "registry=https://own.test/\n",
      allowInternal: true,
      want: { env: {}, allow: ["own.test"], hostEntries: [], internal: [] },
    },
    {
      name: "step env wins",
      env: { npm_config_registry: "https://env.test/" },
      want: { env: {}, allow: ["env.test"] },
    },
    {
      name: "python: pip index and http(s) extras",
      python: true,
      allowInternal: true,
      want: {
        env: {
          npm_config_registry: "https://npm.corp/",
          PIP_INDEX_URL: "https://pypi.corp/simple",
          PIP_EXTRA_INDEX_URL: "https://extra.corp:8443/simple",
        },
        internal: ["npm.corp", "pypi.corp", "extra.corp:8443"],
        caFiles: ["/etc/corp-ca.pem", "/etc/pip-ca.pem"],
      },
    },
  ];
  for (const r of rows) {
    const got = buildRegistryPlan({
      npmrc: r.npmrc ?? null,
      env: r.env ?? {},
      host,
      python: r.python ?? false,
      allowInternal: r.allowInternal ?? false,
    });
    for (const [k, v] of Object.entries(r.want)) assert.deepEqual(got[k as keyof typeof got], v, `${r.name}: ${k}`);
  }
  const none = buildRegistryPlan({
    npmrc: null,
    env: {},
    host: NO_HOST_REGISTRIES,
    python: false,
    allowInternal: true,
  });
  assert.deepEqual(none, { env: {}, allow: ["registry.npmjs.org"], hostEntries: [], internal: [], caFiles: [] });
});

test("buildStepProxyConfig: the platform's trust goes into its own fields, with or without a config", () => {
  const trust = { internalHosts: ["npm.corp"], upstreamCaFiles: ["/etc/corp-ca.pem"] };
  assert.deepEqual(buildStepProxyConfig(null, ["npm.corp"], trust), {
    version: 1,
    rules: [],
    callbacks: [],
    access_control: null,
    no_proxy: [],
    internal_hosts: ["npm.corp"],
    upstream_ca_files: ["/etc/corp-ca.pem"],
  });
  const stored = { version: 1, rules: [], callbacks: [], access_control: { allow_list: ["api.test"] }, no_proxy: [] };
  assert.deepEqual(buildStepProxyConfig(stored, ["npm.corp"], trust), {
    ...stored,
    access_control: { allow_list: ["api.test", "npm.corp"] },
    internal_hosts: ["npm.corp"],
    upstream_ca_files: ["/etc/corp-ca.pem"],
  });
  assert.equal(buildStepProxyConfig(null, ["npm.corp"]), null);
});

test("SandboxPolicy: an internal address only for the named hosts the platform listed, on their port", () => {
  const policy = new SandboxPolicy(
    {
      version: 1,
      rules: [],
      callbacks: [],
      access_control: null,
      no_proxy: [],
      internal_hosts: ["npm.corp", "pypi.corp:8443"],
    },
    { secrets: new Map(), sealed: new Map() },
  );
  const opts = { allowInternal: new CidrSet([]), isSelf: () => false };
  const verdict = (h: string, port: number) =>
    policy.addressVerdict(policy.connectionVerdict(canonicalHost(h)!, port), "10.1.2.3", port, opts, canonicalHost(h)!);
  const rows: Array<[string, number, string | null]> = [
    ["npm.corp", 443, null],
    ["npm.corp", 80, null],
    ["npm.corp", 8443, "internal address (private)"],
    ["other.corp", 443, "internal address (private)"],
    ["pypi.corp", 443, "internal address (private)"],
  ];
  for (const [h, port, want] of rows) assert.equal(verdict(h, port), want, `${h}:${port}`);
  assert.equal(
    policy.addressVerdict({ kind: "allow", raw: false, byAddress: false }, "10.1.2.3", 443, opts),
    "internal address (private)",
    "no host named: no exemption",
  );
  assert.equal(SandboxPolicy.empty().internalAllowed(canonicalHost("npm.corp")!, 443), false);
});

test("build refusals: the build setting for the host's own registry; once per host and reason", () => {
  const internal = { host: "npm.corp", port: 443, reason: "npm.corp resolves to 10.1.2.3: internal address (private)" };
  assert.match(buildRefusalAdvice(internal, ["npm.corp"]) ?? "", /WHARF_BUILD_REGISTRIES_INTERNAL=1/);
  assert.match(buildRefusalAdvice(internal, []) ?? "", /WHARF_EGRESS_ALLOW_INTERNAL \(for example 10\.1\.2\.3\/32\)/);
  assert.match(
    buildRefusalAdvice({ ...internal, reason: "not in allow_list (10.1.2.3:443)" }, ["npm.corp"]) ?? "",
    /allow_list/,
  );
});

test("watchDistinctRefusals: once per (host, port, reason) of its target, the first marked, blocks only", () => {
  const got: Array<[string, boolean]> = [];
  const stop = watchDistinctRefusals(
    "box-1",
    (e, first) => got.push([`${e.host}:${e.port}${e.path} ${e.reason}`, first]),
    3,
  );
  const ev = (over: Record<string, unknown>) =>
    ({
      sandboxId: "box-1",
      workspaceId: "w",
      kind: "block",
      decision: "blocked",
      host: "a.test",
      port: 443,
      method: "GET",
      path: "/1",
      reason: "not in allow_list (a.test:443)",
      ...over,
    }) as Parameters<typeof notifyRefusal>[0];
  notifyRefusal(ev({}));
  notifyRefusal(ev({ path: "/2" }));
  notifyRefusal(ev({ port: 80 }));
  notifyRefusal(ev({ sandboxId: "box-2", host: "other.test" }));
  notifyRefusal(ev({ kind: "inject", host: "inj.test" }));
  notifyRefusal(ev({ host: "b.test" }));
  notifyRefusal(ev({ host: "c.test" }));
  stop();
  notifyRefusal(ev({ host: "d.test" }));
  assert.deepEqual(got, [
    ["a.test:443/1 not in allow_list (a.test:443)", true],
    ["a.test:80/1 not in allow_list (a.test:443)", false],
    ["b.test:443/1 not in allow_list (a.test:443)", false],
  ]);
});
