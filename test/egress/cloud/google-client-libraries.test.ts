/**
 * Unmodified @google-cloud/storage and google-auth-library in a child process holding only the
 * compatibility credentials, through an intercepting CONNECT proxy that applies the Google engine,
 * to a local Cloud Storage stand-in that accepts only tokens the local token endpoint minted (which
 * checks the service account's signature and the rule's scopes). The child never sees a real
 * token or key: a test searches its environment and files.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { after, before, test } from "node:test";
import type { CloudAuditEvent } from "../../../src/egress/credentials/cloud/cloud-audit.ts";
import { createCloudEngines } from "../../../src/egress/credentials/cloud/cloud-engines.ts";
import {
  GOOGLE_COMPAT_ACCESS_TOKEN,
  GOOGLE_COMPAT_CREDENTIALS_PATH,
} from "../../../src/egress/credentials/cloud/google-compat-credentials.ts";
import {
  makeServiceAccount,
  startGoogleApi,
  startTokenEndpoint,
  type TestServiceAccount,
  type TokenEndpoint,
} from "./support/google-stand-ins.ts";
import { startInterceptingProxy } from "./support/intercepting-proxy.ts";
import { createTestCa } from "./support/test-tls.ts";

const SCOPES = ["https://www.googleapis.com/auth/devstorage.read_write"];
let tokens: TokenEndpoint;
let sa: TestServiceAccount;
let api: Awaited<ReturnType<typeof startGoogleApi>>;
let proxy: Awaited<ReturnType<typeof startInterceptingProxy>>;
let dir: string;
let childEnv: Record<string, string>;
const events: CloudAuditEvent[] = [];

before(async () => {
  tokens = await startTokenEndpoint();
  sa = makeServiceAccount(tokens.url);
  tokens.setAccount(sa);
  api = await startGoogleApi((t) => tokens.minted.includes(t));
  const engines = createCloudEngines(
    { cloudB: { enabled: true, serviceAccountJson: sa.json, scopes: SCOPES } },
    { audit: (e) => events.push(e) },
  );
  const ca = await createTestCa();
  const leaf = await ca.issue(["storage.googleapis.com", "oauth2.googleapis.com", "www.googleapis.com"]);
  proxy = await startInterceptingProxy({
    cert: leaf.cert,
    key: leaf.key,
    engine: engines.google!,
    upstreamPort: api.port,
  });
  // The "sandbox": its files under a private root, its environment from the engines.
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-gcp-sandbox-"));
  for (const [p, content] of Object.entries(engines.files)) {
    fs.mkdirSync(path.dirname(path.join(dir, p)), { recursive: true });
    fs.writeFileSync(path.join(dir, p), content);
  }
  fs.writeFileSync(path.join(dir, "ca.pem"), ca.caPem);
  childEnv = {
    ...engines.env,
    GOOGLE_APPLICATION_CREDENTIALS: path.join(dir, GOOGLE_COMPAT_CREDENTIALS_PATH),
    HTTPS_PROXY: `http://127.0.0.1:${proxy.port}`,
    NODE_EXTRA_CA_CERTS: path.join(dir, "ca.pem"),
  };
});

after(async () => {
  await proxy?.close();
  await api?.close();
  await tokens?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

function runChild(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [path.join(import.meta.dirname, "fixtures", "google-client.mjs")], {
      env: { PATH: process.env.PATH ?? "", HOME: dir, ...childEnv },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (d) => (stdout += d));
    child.stderr.on("data", (d) => (stderr += d));
    const timer = setTimeout(() => child.kill("SIGKILL"), 30_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

test("@google-cloud/storage and google-auth-library work with only the compatibility credentials", async () => {
  const { code, stdout, stderr } = await runChild();
  assert.equal(code, 0, stderr);
  const result = JSON.parse(stdout.trim().split("\n").at(-1)!) as {
    data: string;
    files: string[];
    bucket: string;
    clientToken: string;
  };
  assert.equal(result.data, "hello from the sandbox");
  assert.deepEqual(result.files, ["hello.txt"]);
  assert.equal(result.bucket, "wharf-b");
  // The client only ever held the dummy token; the API host only ever saw minted ones.
  assert.equal(result.clientToken, GOOGLE_COMPAT_ACCESS_TOKEN);
  assert.ok(api.seen.length >= 4);
  assert.ok(
    api.seen.every((s) => tokens.minted.includes(s.auth.slice(7))),
    "every API request carried a minted token",
  );
  assert.equal(tokens.minted.length, 1, "one mint served every request");
  assert.deepEqual(tokens.scopes, [SCOPES.join(" ")]);
  assert.ok(events.some((e) => e.kind === "google_bearer" && e.replacedClientAuthorization));
  assert.ok(proxy.outcomes.some((o) => o.startsWith("inject storage.googleapis.com")));
  // Both libraries' token requests (g-a-l 9 inside storage: www.googleapis.com/oauth2/v4/token; g-a-l 10:
  // oauth2.googleapis.com/token) were answered by the proxy with the dummy token, never forwarded.
  assert.ok(
    proxy.outcomes.includes("respond www.googleapis.com/oauth2/v4/token") &&
      proxy.outcomes.includes("respond oauth2.googleapis.com/token"),
    proxy.outcomes.join("\n"),
  );
});

test("the real key and the minted token appear nowhere in the sandbox's environment or files", () => {
  const haystack = [JSON.stringify(childEnv)];
  const walk = (p: string) => {
    for (const e of fs.readdirSync(p, { withFileTypes: true })) {
      const full = path.join(p, e.name);
      if (e.isDirectory()) walk(full);
      else haystack.push(fs.readFileSync(full, "utf8"));
    }
  };
  walk(dir);
  const all = haystack.join("\n");
  const keyBody = sa.privateKeyPem.split("\n").slice(1, -2).join("");
  assert.ok(!all.replace(/\\n|\n/g, "").includes(keyBody.slice(0, 200)), "real private key absent");
  for (const t of tokens.minted) assert.ok(!all.includes(t), "minted token absent");
  assert.ok(all.includes(sa.clientEmail), "the (non-secret) email is there, for client libraries");
});
