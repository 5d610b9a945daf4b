import assert from "node:assert/strict";
import type net from "node:net";
import { describe, test } from "node:test";
import { registryEntry, registryHosts } from "../../src/deployments/build/registry-hosts.ts";
import {
  buildEgressId,
  buildStepProxyConfig,
  egressBinds,
  egressMounts,
  serverEgressId,
} from "../../src/deployments/confinement/egress-plan.ts";
import { takeListeners } from "../../src/deployments/runtime/revision-egress.ts";

describe("deployment egress decisions", () => {
  test("registry entries: the default registry (environment over .npmrc over npm's), scope registries, ports", () => {
    const rows: Array<{ npmrc: string | null; env?: Record<string, string>; want: string[] }> = [
      { npmrc: null, want: ["registry.npmjs.org"] },
      { npmrc: "registry=http://registry.test/", want: ["registry.test"] },
      { npmrc: "registry = https://npm.example.com:8443/repo/\n", want: ["npm.example.com:8443"] },
      {
        npmrc: "; comment\n# comment\n@acme:registry=https://npm.acme.dev/\nfund=false",
        want: ["registry.npmjs.org", "npm.acme.dev"],
      },
      { npmrc: 'registry="https://a.test/"\nregistry=https://b.test/', want: ["b.test"] },
      { npmrc: "registry=https://a.test/", env: { npm_config_registry: "https://env.test/" }, want: ["env.test"] },
      { npmrc: "registry=${MIRROR}/npm/", env: { MIRROR: "https://mirror.test" }, want: ["mirror.test"] },
      { npmrc: "registry=file:///srv/npm\n@x:registry=not a url", want: [] },
      { npmrc: "registry=http://[::1]:4873/", want: ["[::1]:4873"] },
      { npmrc: "//registry.test/:_authToken=secret\nregistry=https://registry.test/", want: ["registry.test"] },
    ];
    for (const r of rows)
      assert.deepEqual(registryHosts({ npmrc: r.npmrc, env: r.env ?? {} }), r.want, JSON.stringify(r));
    assert.equal(registryEntry("https://registry.npmjs.org/"), "registry.npmjs.org");
    assert.equal(registryEntry("http://registry.test:80/"), "registry.test");
  });

  test("a build step's rules: registries join an allow_list; deny_list, no access control and no config are kept", () => {
    const rules = [
      { name: "r", type: "header", enabled: true, match_hosts: ["api.test"], match_paths: [], headers: [] },
    ];
    const rows: Array<{ stored: unknown; want: unknown }> = [
      { stored: null, want: null },
      {
        stored: { version: 1, rules, callbacks: [], access_control: null, no_proxy: [] },
        want: { version: 1, rules, callbacks: [], access_control: null, no_proxy: [] },
      },
      {
        stored: { version: 1, rules, callbacks: [], access_control: { allow_list: ["api.test"] }, no_proxy: [] },
        want: {
          version: 1,
          rules,
          callbacks: [],
          access_control: { allow_list: ["api.test", "registry.test"] },
          no_proxy: [],
        },
      },
      {
        stored: {
          version: 1,
          rules: [],
          callbacks: [],
          access_control: { allow_list: ["registry.test"] },
          no_proxy: [],
        },
        want: { version: 1, rules: [], callbacks: [], access_control: { allow_list: ["registry.test"] }, no_proxy: [] },
      },
      {
        stored: {
          version: 1,
          rules: [],
          callbacks: [],
          access_control: { deny_list: ["registry.test"] },
          no_proxy: [],
        },
        want: { version: 1, rules: [], callbacks: [], access_control: { deny_list: ["registry.test"] }, no_proxy: [] },
      },
    ];
    for (const r of rows)
      assert.deepEqual(buildStepProxyConfig(r.stored, ["registry.test"]), r.want, JSON.stringify(r.stored));
    assert.equal(serverEgressId("r1"), "dep-r1");
    assert.equal(buildEgressId("r1"), "dep-build-r1");
  });

  test("egress files in a read-only confinement: /usr/local whole, files over the base's, new files under home only", () => {
    const files = new Set(["/etc/ssl/certs/ca-certificates.crt", "/etc/resolv.conf"]);
    const dirs = new Set(["/usr/local", "/etc"]);
    const baseHas = (p: string) => (files.has(p) ? "file" : dirs.has(p) ? "dir" : null);
    const m = egressMounts(
      {
        "/usr/local/share/ca-certificates/wharf-egress-ca.crt": "CA",
        "/etc/ssl/certs/ca-certificates.crt": "ROOTS+CA",
        "/etc/resolv.conf": "nameserver 127.0.0.1\n",
        "/home/user/.aws/credentials": "[default]\n",
        "/etc/wharf/google-service-account.json": "{}",
        "/usr/lib/evil": "x",
        "relative/path": "x",
        "/home/../etc/passwd": "x",
      },
      baseHas,
    );
    assert.deepEqual(m.binds, [
      { rel: "usr-local", dest: "/usr/local" },
      { rel: "files/etc/ssl/certs/ca-certificates.crt", dest: "/etc/ssl/certs/ca-certificates.crt" },
      { rel: "files/etc/resolv.conf", dest: "/etc/resolv.conf" },
      { rel: "files/home/user/.aws/credentials", dest: "/home/user/.aws/credentials" },
    ]);
    assert.equal(m.writes["usr-local/share/ca-certificates/wharf-egress-ca.crt"], "CA");
    assert.equal(m.writes["usr-local/bin/.keep"], "", "the base image's empty /usr/local/bin stays");
    assert.deepEqual(m.unplaced, [
      "/etc/wharf/google-service-account.json",
      "/usr/lib/evil",
      "relative/path",
      "/home/../etc/passwd",
    ]);
    assert.deepEqual(egressBinds("/h/egress/dep-x", m)[0], {
      src: "/h/egress/dep-x/usr-local",
      dest: "/usr/local",
      beneath: "/h/egress/dep-x",
    });
    // A base image with Wharf's /etc/wharf folder shows the Google compatibility file there.
    dirs.add("/etc/wharf");
    const withWharf = egressMounts(
      { "/etc/wharf/google-service-account.json": "{}", "/usr/local/share/ca-certificates/x.crt": "CA" },
      baseHas,
    );
    assert.deepEqual(withWharf.binds, [
      { rel: "usr-local", dest: "/usr/local" },
      { rel: "etc-wharf", dest: "/etc/wharf" },
    ]);
    assert.equal(withWharf.writes["etc-wharf/google-service-account.json"], "{}");
    assert.deepEqual(withWharf.unplaced, []);
  });

  test("the egress listeners are taken out of what a confinement handed over; the gateway's and the database's stay", () => {
    const fake = (n: number) => ({ n }) as unknown as net.Server;
    const captured = {
      tcp: new Map([
        [2480, fake(1)],
        [5432, fake(2)],
        [80, fake(3)],
        [443, fake(4)],
        [3128, fake(5)],
      ]),
      udp: [{} as never],
      errors: ["e"],
    };
    const mine = takeListeners(captured, [80, 443, 3128]);
    assert.deepEqual([...mine.tcp.keys()], [80, 443, 3128]);
    assert.deepEqual([...captured.tcp.keys()], [2480, 5432]);
    assert.equal(mine.udp.length, 1);
    assert.equal(captured.udp.length, 0);
  });
});
