import assert from "node:assert/strict";
import path from "node:path";
import { test } from "node:test";
import { build } from "esbuild";
import { GOOGLE_COMPAT_ACCESS_TOKEN } from "../../src/egress/credentials/cloud/google-compat-credentials.ts";
import { startSandboxPlatform } from "../sandboxes/support.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { makeServiceAccount, startGoogleApi, startTokenEndpoint } from "./cloud/support/google-stand-ins.ts";
import { hostsSetting, startTlsFront, startUpstreams } from "./support/upstreams.ts";

const SCOPES = ["https://www.googleapis.com/auth/devstorage.read_write"];
/** The real token endpoint and the Cloud Storage stand-in: reached by the proxy only. */
const GOOGLE_SIDE = "127.0.0.4";

/**
 * `cloud_b` through the real proxy from inside a real sandbox: unmodified @google-cloud/storage and
 * google-auth-library holding only the compatibility credentials, under an allow list that names
 * the API host and nothing else. Their token-endpoint calls and the metadata server are answered
 * by the proxy itself (nothing is dialled, so the allow list does not apply); the API host sees
 * only tokens the real token endpoint minted for the rule's scopes.
 */
test("cloud_b from inside a real sandbox: Google client libraries, metadata server, allow list of the API host only", async (t) => {
  if (!requireCapability(t, process.platform === "linux" && isRoot(), "sandboxes need root on Linux")) return;
  const up = await startUpstreams(t, ["other.test"]);
  const tokens = await startTokenEndpoint(GOOGLE_SIDE);
  t.after(() => tokens.close());
  const sa = makeServiceAccount(tokens.url);
  tokens.setAccount(sa);
  const api = await startGoogleApi((token) => tokens.minted.includes(token), GOOGLE_SIDE);
  t.after(() => api.close());
  const googleHosts = await startTlsFront(t, up, ["storage.googleapis.com"], GOOGLE_SIDE, api.port);

  Object.assign(process.env, {
    WHARF_EGRESS_HOSTS: [hostsSetting(up, ["other.test"]), ...googleHosts].join(","),
    WHARF_EGRESS_ALLOW_INTERNAL: `${up.address}/32,${GOOGLE_SIDE}/32`,
    WHARF_EGRESS_UPSTREAM_CA_FILE: up.caFile,
    WHARF_EGRESS_SYSTEM_DNS: "0",
  });
  const p = await startSandboxPlatform(t);
  if (!p) return;
  const proxy_config = {
    access_control: { allow_list: ["storage.googleapis.com"] },
    rules: [
      {
        name: "gcp",
        type: "cloud_b",
        cloud_b: { service_account_json: { type: "opaque", value: sa.json }, scopes: SCOPES },
      },
    ],
  };
  const bundle = build({
    entryPoints: [path.join(import.meta.dirname, "cloud/fixtures/google-client.mjs")],
    bundle: true,
    platform: "node",
    format: "esm",
    write: false,
    logLevel: "silent",
    banner: { js: "import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);" },
  });
  // Created without the rule; the PATCH that adds it brings the compatibility file and environment
  // into the running sandbox.
  const sbx = await p.create({
    name: "gcp-e2e",
    proxy_config: { access_control: proxy_config.access_control },
    wait_for_ready: true,
  });
  const sh = async (cmd: string, timeout = 30) => {
    const r = await p.exec(sbx, cmd, { timeout });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body as { stdout: string; stderr: string; exit_code: number };
  };
  let r = await sh('echo "[$GOOGLE_APPLICATION_CREDENTIALS]"');
  assert.equal(r.stdout.trim(), "[]");
  const patched = await p.api("/v2/sandboxes/boxes/gcp-e2e", { method: "PATCH", json: { proxy_config } });
  assert.equal(patched.status, 200, await patched.clone().text());
  r = await sh('test -r "$GOOGLE_APPLICATION_CREDENTIALS" && echo present');
  assert.equal(r.stdout.trim(), "present", r.stderr);

  // The unmodified libraries: save, download, list, and a raw request through GoogleAuth.
  const form = new FormData();
  form.append("file", new Blob([Buffer.from((await bundle).outputFiles[0].contents)]), "google.mjs");
  const upRes = await fetch(`${sbx.dataplane_url}/upload?path=/tmp/google.mjs`, {
    method: "POST",
    headers: { "x-api-key": p.apiKey },
    body: form,
  });
  assert.equal(upRes.status, 200, await upRes.clone().text());
  r = await sh("node /tmp/google.mjs", 60);
  assert.equal(r.exit_code, 0, r.stderr);
  const result = JSON.parse(r.stdout.trim().split("\n").at(-1)!) as {
    data: string;
    files: string[];
    bucket: string;
    clientToken: string;
  };
  assert.deepEqual(
    { data: result.data, files: result.files, bucket: result.bucket },
    { data: "hello from the sandbox", files: ["hello.txt"], bucket: "wharf-b" },
  );
  assert.equal(result.clientToken, GOOGLE_COMPAT_ACCESS_TOKEN, "the sandbox only ever held the dummy token");
  assert.ok(
    api.seen.length >= 4 && api.seen.every((s) => tokens.minted.includes(s.auth.slice(7))),
    "every API request carried a minted token",
  );
  assert.equal(tokens.minted.length, 1, "one mint served every request");
  assert.deepEqual(tokens.scopes, [SCOPES.join(" ")]);

  // The metadata server, by name and by its link-local address, served by the proxy.
  const md = "curl -sS --max-time 10 -H 'Metadata-Flavor: Google'";
  r = await sh(
    `${md} http://metadata.google.internal/computeMetadata/v1/instance/service-accounts/default/email && echo && ${md} http://169.254.169.254/computeMetadata/v1/instance/service-accounts/default/token`,
  );
  const [email, token] = r.stdout.trim().split("\n");
  assert.equal(email, sa.clientEmail, r.stderr);
  assert.equal(JSON.parse(token).access_token, GOOGLE_COMPAT_ACCESS_TOKEN);
  r = await sh(
    "curl -sS --max-time 10 -w '\\n%{http_code}' http://metadata.google.internal/computeMetadata/v1/project/project-id",
  );
  assert.match(r.stdout, /Metadata-Flavor\n+403$/, "the metadata server wants Metadata-Flavor, as on GCE");

  // The allow list still holds for everything that would leave: another Google host, another host.
  r = await sh(
    "curl -sS --max-time 10 -o /dev/null -w '%{http_code}\\n' https://www.googleapis.com/drive/v3/files; curl -sS --max-time 10 -o /dev/null -w '%{http_code}\\n' https://other.test/x",
  );
  assert.deepEqual(r.stdout.trim().split("\n"), ["403", "403"], r.stderr);
  assert.ok(!up.seen.some((e) => e.headers.host === "other.test"));

  // Neither the real key nor a minted token anywhere in the sandbox.
  const needles = [
    ...sa.privateKeyPem
      .split("\n")
      .filter((l) => l.length === 64)
      .slice(2, 5),
    ...tokens.minted,
  ];
  r = await sh(
    `env; grep -rIlF ${needles.map((n) => `-e '${n}'`).join(" ")} /etc /root /home /tmp /usr/local /workspace 2>/dev/null; true`,
  );
  for (const n of needles) assert.ok(!r.stdout.includes(n), "no real credential in the sandbox's environment or files");

  const res = await p.api("/v2/sandboxes/boxes/gcp-e2e/egress-log?limit=200");
  const log = JSON.stringify(await res.json());
  assert.match(log, /"rule":"gcp"/);
  for (const n of needles)
    assert.ok(!log.includes(n) && !p.logs().includes(n), "no credential in the egress log or the platform's logs");

  // Deleting the sandbox removes its sealed service-account JSON: nothing refers to it any more.
  const sealed = () => p.ctx.db.selectFrom("egress_sealed_values").select("id").execute();
  assert.ok((await sealed()).length >= 1);
  assert.equal((await p.api("/v2/sandboxes/boxes/gcp-e2e", { method: "DELETE" })).status, 204);
  assert.deepEqual(await sealed(), []);
});
