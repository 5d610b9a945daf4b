import assert from "node:assert/strict";
import crypto from "node:crypto";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { test } from "node:test";
import { build } from "esbuild";
import { AWS_PLACEHOLDER_ACCESS_KEY_ID } from "../../src/egress/credentials/cloud/index.ts";
import { startSandboxPlatform } from "../sandboxes/support.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";
import { startVerifyingS3 } from "./cloud/support/s3-verifying-server.ts";
import { hostsSetting, startTlsFront, startUpstreams, useUpstreamsForEgress } from "./support/upstreams.ts";

const AWS_REAL = {
  accessKeyId: "AKIA" + crypto.randomBytes(8).toString("hex").toUpperCase(),
  secretAccessKey: crypto.randomBytes(30).toString("base64"),
};
const CB_TOKEN = "cbt_" + crypto.randomBytes(16).toString("hex");
const BUCKET = "wharf-e2e-bucket";
const S3_HOSTS = ["s3.us-west-2.amazonaws.com", `${BUCKET}.s3.us-west-2.amazonaws.com`];
const CALLBACK_ADDRESS = "127.0.0.3";

function googleServiceAccount(): { json: string; keyLines: string[] } {
  const { privateKey } = crypto.generateKeyPairSync("rsa", { modulusLength: 2048 });
  const pem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
  const json = JSON.stringify({
    type: "service_account",
    project_id: "wharf-e2e",
    private_key_id: "k1",
    private_key: pem,
    client_email: "agent@wharf-e2e.iam.gserviceaccount.com",
    token_uri: "https://oauth2.googleapis.com/token",
  });
  // Distinctive lines of the key: any of them in the sandbox would be a leak.
  return {
    json,
    keyLines: pem
      .split("\n")
      .filter((l) => l.length === 64)
      .slice(2, 5),
  };
}

const listen = (server: net.Server, address: string) =>
  new Promise<number>((resolve, reject) =>
    server.once("error", reject).listen(0, address, () => resolve((server.address() as net.AddressInfo).port)),
  );

/**
 * The cloud engines through the real proxy, from inside a real sandbox: a credential callback on
 * loopback (header injected, static rule wins, 500 → 502), the unmodified AWS SDK v3 S3 client
 * with only the placeholder credentials against a signature-checking S3 stand-in reached as an
 * AWS host name, and neither the real AWS key nor the Google key anywhere in the sandbox.
 */
test("cloud engines from inside a real sandbox: callback, cloud_a with the AWS SDK, no real key inside", async (t) => {
  if (!requireCapability(t, process.platform === "linux" && isRoot(), "sandboxes need root on Linux")) return;
  const up = await startUpstreams(t, ["api.test", "other.test", "fail.test", ...S3_HOSTS]);

  // The credential callback (loopback, reached by the proxy, allowed by operator setting).
  const calls: Array<{
    auth: string | undefined;
    contentType: string | undefined;
    body: { host: string; port: number };
  }> = [];
  const callback = http.createServer((req, res) => {
    let text = "";
    req.on("data", (d: Buffer) => (text += d.toString()));
    req.on("end", () => {
      const body = JSON.parse(text) as { host: string; port: number };
      calls.push({
        auth: req.headers["x-cb-auth"] as string | undefined,
        contentType: req.headers["content-type"],
        body,
      });
      if (body.host === "fail.test") return void res.writeHead(500).end("boom");
      res
        .writeHead(200, { "content-type": "application/json" })
        .end(JSON.stringify({ headers: { "X-From-Callback": `cb-${body.host}-${body.port}` } }));
    });
  });
  const callbackPort = await listen(callback, CALLBACK_ADDRESS);
  t.after(() => new Promise((r) => (callback.closeAllConnections(), callback.close(r))));

  // The S3 stand-in checks every signature with the real keys; a TLS front gives it the AWS names.
  const s3 = await startVerifyingS3(AWS_REAL);
  t.after(() => s3.close());
  const s3Hosts = await startTlsFront(t, up, S3_HOSTS, "127.0.0.1", s3.port);

  const hosts = [hostsSetting(up, ["api.test", "other.test", "fail.test"]), ...s3Hosts].join(",");
  useUpstreamsForEgress(up, { hosts, allowInternal: [`${CALLBACK_ADDRESS}/32`] });
  const p = await startSandboxPlatform(t);
  if (!p) return;

  const google = googleServiceAccount();
  const proxy_config = {
    rules: [
      {
        name: "static",
        match_hosts: ["other.test"],
        headers: [{ name: "X-Static", type: "plaintext", value: "static-wins" }],
      },
      {
        name: "aws",
        type: "cloud_a",
        cloud_a: {
          access_key_id: { type: "opaque", value: AWS_REAL.accessKeyId },
          secret_access_key: { type: "opaque", value: AWS_REAL.secretAccessKey },
        },
      },
      {
        name: "gcp",
        type: "cloud_b",
        cloud_b: {
          service_account_json: { type: "opaque", value: google.json },
          scopes: ["https://www.googleapis.com/auth/devstorage.read_write"],
        },
      },
    ],
    callbacks: [
      {
        match_hosts: ["api.test", "other.test", "fail.test"],
        url: `http://${CALLBACK_ADDRESS}:${callbackPort}/resolve`,
        ttl_seconds: 60,
        request_headers: [{ name: "X-Cb-Auth", type: "opaque", value: CB_TOKEN }],
      },
    ],
  };
  const bundle = build({
    entryPoints: [path.join(import.meta.dirname, "fixtures/s3-in-sandbox.mjs")],
    bundle: true,
    platform: "node",
    format: "cjs",
    write: false,
    logLevel: "silent",
  });
  const sbx = await p.create({ name: "cloud-e2e", proxy_config, wait_for_ready: true });
  const sh = async (cmd: string, timeout = 30) => {
    const r = await p.exec(sbx, cmd, { timeout });
    assert.equal(r.status, 200, JSON.stringify(r.body));
    return r.body as { stdout: string; stderr: string; exit_code: number };
  };

  // (1) Callback: injected upstream, requested once per host:port (cached), with its configured header.
  let r = await sh(
    "curl -sS --max-time 10 https://api.test/one && echo && curl -sS --max-time 10 https://api.test/two",
  );
  const [first, second] = r.stdout
    .trim()
    .split("\n")
    .map((l) => JSON.parse(l));
  assert.equal(first.headers["x-from-callback"], "cb-api.test-443", r.stderr);
  assert.equal(second.headers["x-from-callback"], "cb-api.test-443");
  const apiCalls = calls.filter((c) => c.body.host === "api.test");
  assert.equal(apiCalls.length, 1, "the second request is a cache hit");
  assert.deepEqual(apiCalls[0], {
    auth: CB_TOKEN,
    contentType: "application/json",
    body: { host: "api.test", port: 443 },
  });
  // A static rule matching the host wins: no callback for other.test.
  r = await sh("curl -sS --max-time 10 https://other.test/static");
  const echo = JSON.parse(r.stdout);
  assert.equal(echo.headers["x-static"], "static-wins");
  assert.equal(echo.headers["x-from-callback"], undefined);
  assert.ok(!calls.some((c) => c.body.host === "other.test"));
  // A failing callback: 502 `callback resolution failed`, nothing upstream.
  r = await sh("curl -sS --max-time 10 -w '\\n%{http_code}' https://fail.test/x");
  assert.match(r.stdout, /callback resolution failed\n+502$/);
  assert.ok(!up.seen.some((e) => e.headers.host === "fail.test"), "nothing reached the upstream");

  // (2) cloud_a: the unmodified AWS SDK v3 S3 client, placeholder credentials only.
  const code = (await bundle).outputFiles[0].contents;
  const form = new FormData();
  form.append("file", new Blob([Buffer.from(code)]), "s3.cjs");
  const upRes = await fetch(`${sbx.dataplane_url}/upload?path=/tmp/s3.cjs`, {
    method: "POST",
    headers: { "x-api-key": p.apiKey },
    body: form,
  });
  assert.equal(upRes.status, 200, await upRes.clone().text());
  r = await sh(`node /tmp/s3.cjs ${BUCKET} 'dir/hello world+1 ü.txt'`, 30);
  assert.equal(r.exit_code, 0, r.stderr);
  const result = JSON.parse(r.stdout);
  assert.equal(result.ok, true);
  assert.equal(result.accessKeyId, AWS_PLACEHOLDER_ACCESS_KEY_ID);
  assert.ok(s3.requests.length >= 5 && s3.requests.every((q) => q.status === 200), JSON.stringify(s3.requests));
  assert.ok(
    s3.requests.some(
      (q) => q.method === "PUT" && q.payloadMode === "STREAMING-UNSIGNED-PAYLOAD-TRAILER" && q.verifiedChecksum,
    ),
    JSON.stringify(s3.requests),
  );

  // (3) Neither the real AWS key nor the Google key is anywhere in the sandbox; the placeholders are.
  const needles = [AWS_REAL.accessKeyId, AWS_REAL.secretAccessKey, ...google.keyLines, CB_TOKEN];
  r = await sh(
    `env; grep -rIlF ${needles.map((n) => `-e '${n}'`).join(" ")} /etc /root /home /tmp /usr/local /workspace 2>/dev/null; true`,
  );
  for (const n of needles) assert.ok(!r.stdout.includes(n), "no real credential in the sandbox's environment or files");
  assert.match(r.stdout, new RegExp(`AWS_ACCESS_KEY_ID=${AWS_PLACEHOLDER_ACCESS_KEY_ID}`));
  assert.match(r.stdout, /GOOGLE_APPLICATION_CREDENTIALS=/);
  r = await sh("cat ~/.aws/credentials /etc/wharf/google-service-account.json >/dev/null && echo present");
  assert.equal(r.stdout.trim(), "present", r.stderr);

  // PATCH rebuilds the engines: new callback objects (empty cache, new header), cloud_a gone (the
  // SDK's placeholder signature then reaches the stand-in unsigned and is refused), and a callback
  // URL on an address the operator did not allow is refused by the proxy's address classification.
  const patched = {
    rules: [proxy_config.rules[0]],
    callbacks: [
      {
        match_hosts: ["api.test"],
        url: `http://${CALLBACK_ADDRESS}:${callbackPort}/resolve`,
        ttl_seconds: 60,
        request_headers: [{ name: "X-Cb-Auth", type: "opaque", value: `${CB_TOKEN}-2` }],
      },
      {
        match_hosts: ["fail.test"],
        url: `http://127.0.0.5:${callbackPort}/resolve`,
        ttl_seconds: 60,
        request_headers: [],
      },
    ],
  };
  let res = await p.api("/v2/sandboxes/boxes/cloud-e2e", { method: "PATCH", json: { proxy_config: patched } });
  assert.equal(res.status, 200, await res.clone().text());
  r = await sh("curl -sS --max-time 10 https://api.test/after-patch");
  assert.equal(JSON.parse(r.stdout).headers["x-from-callback"], "cb-api.test-443", r.stderr);
  assert.equal(calls.filter((c) => c.body.host === "api.test").length, 2, "a PATCH starts from an empty cache");
  assert.equal(calls.at(-1)!.auth, `${CB_TOKEN}-2`);
  const before = calls.length;
  r = await sh("curl -sS --max-time 10 -w '\\n%{http_code}' https://fail.test/blocked-callback");
  assert.match(r.stdout, /callback resolution failed\n+502$/);
  assert.equal(calls.length, before, "the callback on a non-allowed address was never dialled");
  r = await sh(`node /tmp/s3.cjs ${BUCKET} after-patch.txt`, 30);
  assert.notEqual(r.exit_code, 0, "without cloud_a nothing is re-signed");
  assert.match(r.stderr, /InvalidAccessKeyId|SignatureDoesNotMatch|AccessDenied|403/);

  res = await p.api("/v2/sandboxes/boxes/cloud-e2e/egress-log?limit=200");
  const log = JSON.stringify(await res.json());
  assert.match(log, /"kind":"sign","decision":"signed","rule":"aws"/);
  assert.match(log, /"kind":"callback","decision":"failed"/);
  assert.match(log, /egress blocked: 127\.0\.0\.5/);
  for (const n of needles)
    assert.ok(!log.includes(n) && !p.logs().includes(n), "no credential in the egress log or the platform's logs");
});
