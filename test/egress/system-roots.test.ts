// The egress proxy's upstream TLS trusts the host's CA store, as the host's curl, git, npm and pip do.
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { loadEgressSettings } from "../../src/egress/egress-settings.ts";
import {
  chooseSystemBundle,
  pemCertificates,
  readSystemRoots,
  SYSTEM_BUNDLE_CANDIDATES,
} from "../../src/egress/system-roots.ts";
import { curl, parseCurl, startProxy } from "./support/proxy.ts";
import { startUpstreams } from "./support/upstreams.ts";

test("chooseSystemBundle: which host bundle is read", () => {
  const has =
    (...paths: string[]) =>
    (p: string) =>
      paths.includes(p);
  const rows: Array<
    [
      setting: string | undefined,
      sslCertFile: string | undefined,
      exists: (p: string) => boolean,
      want: ReturnType<typeof chooseSystemBundle>,
    ]
  > = [
    [
      undefined,
      undefined,
      has("/etc/ssl/certs/ca-certificates.crt"),
      { kind: "file", path: "/etc/ssl/certs/ca-certificates.crt", required: false },
    ],
    [
      "auto",
      undefined,
      has("/etc/pki/tls/certs/ca-bundle.crt"),
      { kind: "file", path: "/etc/pki/tls/certs/ca-bundle.crt", required: false },
    ],
    [
      "",
      undefined,
      has("/etc/ssl/cert.pem", "/etc/ssl/ca-bundle.pem"),
      { kind: "file", path: "/etc/ssl/ca-bundle.pem", required: false },
    ],
    [
      undefined,
      "/opt/corp/roots.pem",
      has(...SYSTEM_BUNDLE_CANDIDATES),
      { kind: "file", path: "/opt/corp/roots.pem", required: false },
    ],
    ["/srv/bundle.pem", "/opt/corp/roots.pem", has(), { kind: "file", path: "/srv/bundle.pem", required: true }],
    ["none", "/opt/corp/roots.pem", has(...SYSTEM_BUNDLE_CANDIDATES), { kind: "off" }],
    [undefined, undefined, has(), { kind: "off" }],
  ];
  for (const [setting, ssl, exists, want] of rows)
    assert.deepEqual(chooseSystemBundle(setting, ssl, exists), want, `${setting} ${ssl}`);
});

test("readSystemRoots: a missing default bundle trusts nothing more; a missing explicit one stops start-up", () => {
  const missing = () => {
    throw new Error("ENOENT");
  };
  assert.deepEqual(readSystemRoots({ kind: "file", path: "/nope", required: false }, missing), {
    path: null,
    pems: [],
  });
  assert.throws(
    () => readSystemRoots({ kind: "file", path: "/nope", required: true }, missing),
    /WHARF_EGRESS_SYSTEM_CA_FILE: cannot read \/nope/,
  );
  assert.throws(
    () => loadEgressSettings({ WHARF_EGRESS_SYSTEM_CA_FILE: "/nonexistent/bundle.pem" }),
    /WHARF_EGRESS_SYSTEM_CA_FILE/,
  );
  const pem = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----";
  assert.deepEqual(pemCertificates(`# comment\n${pem}\n\n${pem}\n`), [pem, pem]);
});

test("an upstream whose CA is in the host's bundle is trusted through the proxy (and not without it)", async (t) => {
  const up = await startUpstreams(t);
  // A host-store-like bundle: the host's real roots with the "company" CA appended, as
  // update-ca-certificates writes it. The real /etc is left alone.
  const real =
    SYSTEM_BUNDLE_CANDIDATES.map((p) => (fs.existsSync(p) ? fs.readFileSync(p, "utf8") : "")).find(Boolean) ?? "";
  const bundle = path.join(up.dir, "ca-certificates.crt");
  fs.writeFileSync(bundle, `${real}\n${up.ca.certPem}`);
  const config = { access_control: { allow_list: ["api.test"] } };

  const trusted = await startProxy(t, up, config, {
    env: { WHARF_EGRESS_UPSTREAM_CA_FILE: "", WHARF_EGRESS_SYSTEM_CA_FILE: bundle },
  });
  assert.equal(loadEgressSettings({ WHARF_EGRESS_SYSTEM_CA_FILE: bundle }).systemCaFile, bundle);
  const ok = parseCurl(await curl(trusted, "https://api.test/through-host-store"));
  assert.equal(ok.status, 200, ok.body);
  assert.equal(ok.json.url, "/through-host-store");

  // Through OpenSSL's own variable too, as the host's curl would read it.
  const viaSsl = await startProxy(t, up, config, { env: { WHARF_EGRESS_UPSTREAM_CA_FILE: "", SSL_CERT_FILE: bundle } });
  assert.equal(parseCurl(await curl(viaSsl, "https://api.test/ssl-cert-file")).status, 200);

  const untrusted = await startProxy(t, up, config, {
    env: { WHARF_EGRESS_UPSTREAM_CA_FILE: "", WHARF_EGRESS_SYSTEM_CA_FILE: "none" },
  });
  const refused = parseCurl(await curl(untrusted, "https://api.test/not-trusted"));
  assert.equal(refused.status, 502, refused.body);
  assert.ok(!up.seen.some((e) => e.url === "/not-trusted"));
});
