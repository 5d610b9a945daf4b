/** The Google token minter with google-auth-library against a local token endpoint that checks the assertion. */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";
import type { CloudAuditEvent } from "../../../src/egress/credentials/cloud/cloud-audit.ts";
import { createGoogleBearerEngine } from "../../../src/egress/credentials/cloud/google-bearer-engine.ts";
import {
  GOOGLE_COMPAT_ACCESS_TOKEN,
  googleCompatEnv,
  googleCompatFiles,
} from "../../../src/egress/credentials/cloud/google-compat-credentials.ts";
import { isGoogleApiHost, isGoogleSignedUrl } from "../../../src/egress/credentials/cloud/google-hosts.ts";
import { handleMetadataRequest } from "../../../src/egress/credentials/cloud/google-metadata-emulator.ts";
import { parseServiceAccountJson } from "../../../src/egress/credentials/cloud/google-service-account.ts";
import {
  GoogleTokenMinter,
  GoogleTokenUnavailable,
} from "../../../src/egress/credentials/cloud/google-token-minter.ts";
import {
  makeServiceAccount,
  startTokenEndpoint,
  type TestServiceAccount,
  type TokenEndpoint,
} from "./support/google-stand-ins.ts";

const SCOPES = ["https://www.googleapis.com/auth/devstorage.read_write", "https://www.googleapis.com/auth/pubsub"];
let endpoint: TokenEndpoint;
let sa: TestServiceAccount;

before(async () => {
  endpoint = await startTokenEndpoint();
  sa = makeServiceAccount(endpoint.url);
  endpoint.setAccount(sa);
});
after(() => endpoint?.close());

test("mints with the JSON's token_uri and the rule's scopes; caches until shortly before expiry", async () => {
  let now = Date.now();
  const events: CloudAuditEvent[] = [];
  const minter = new GoogleTokenMinter({
    serviceAccount: parseServiceAccountJson(sa.json),
    scopes: SCOPES,
    now: () => now,
    audit: (e) => events.push(e),
  });
  const before = endpoint.minted.length;
  const first = await minter.token();
  assert.equal(first.cache, "miss");
  assert.equal(first.token, endpoint.minted.at(-1));
  assert.equal(endpoint.scopes.at(-1), SCOPES.join(" "));
  assert.deepEqual(await minter.token(), { token: first.token, cache: "hit" });
  now += 50 * 60_000; // 50 min: still before expiry − 5 min
  assert.equal((await minter.token()).cache, "hit");
  now += 6 * 60_000; // 56 min: inside the refresh margin
  const second = await minter.token();
  assert.equal(second.cache, "miss");
  assert.notEqual(second.token, first.token);
  assert.equal(endpoint.minted.length, before + 2);
  const minted = events.filter((e) => e.kind === "google_token_minted");
  assert.equal(minted.length, 2);
  assert.ok(!JSON.stringify(events).includes(first.token) && !JSON.stringify(events).includes("PRIVATE KEY"));
});

test("concurrent callers share one mint", async () => {
  endpoint.delayMs = 150;
  try {
    const minter = new GoogleTokenMinter({ serviceAccount: parseServiceAccountJson(sa.json), scopes: SCOPES });
    const before = endpoint.minted.length;
    const all = await Promise.all(Array.from({ length: 20 }, () => minter.token()));
    assert.equal(endpoint.minted.length, before + 1);
    assert.equal(new Set(all.map((t) => t.token)).size, 1);
  } finally {
    endpoint.delayMs = 0;
  }
});

test("a failing token endpoint fails the request (502, audited), caches nothing, and the next request retries", async () => {
  const events: CloudAuditEvent[] = [];
  const engine = createGoogleBearerEngine({
    serviceAccount: parseServiceAccountJson(sa.json),
    scopes: SCOPES,
    audit: (e) => events.push(e),
  });
  endpoint.failNext = 1;
  const failed = await engine.handle({
    method: "GET",
    host: "storage.googleapis.com",
    target: "/storage/v1/b",
    headers: [],
  });
  assert.equal(failed.action, "error");
  if (failed.action === "error") {
    assert.ok(failed.error instanceof GoogleTokenUnavailable);
    assert.equal(failed.error.status, 502);
    assert.match(failed.error.message, /token endpoint answered 400 invalid_grant/);
  }
  const ok = await engine.handle({
    method: "GET",
    host: "storage.googleapis.com",
    target: "/storage/v1/b",
    headers: [["Authorization", "Bearer self-signed-jwt"]],
  });
  assert.equal(ok.action, "inject");
  if (ok.action === "inject") assert.deepEqual(ok.headers, [["Authorization", `Bearer ${endpoint.minted.at(-1)}`]]);
  assert.deepEqual(
    events.map((e) => e.kind),
    ["google_token_failed", "google_token_minted", "google_bearer"],
  );
});

test("engine: token endpoint answered locally, non-Google hosts and signed URLs untouched", async () => {
  const engine = createGoogleBearerEngine({ serviceAccount: parseServiceAccountJson(sa.json), scopes: SCOPES });
  const token = await engine.handle({ method: "POST", host: "oauth2.googleapis.com", target: "/token", headers: [] });
  assert.equal(token.action, "respond");
  if (token.action === "respond") assert.equal(JSON.parse(token.body).access_token, GOOGLE_COMPAT_ACCESS_TOKEN);
  assert.deepEqual(
    await engine.handle({ method: "GET", host: "example.com", target: "/", headers: [["Authorization", "Bearer x"]] }),
    { action: "pass" },
  );
  assert.deepEqual(
    await engine.handle({
      method: "GET",
      host: "storage.googleapis.com",
      target: "/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Signature=ab",
      headers: [],
    }),
    { action: "pass" },
  );
  assert.ok(
    isGoogleApiHost("us-central1-aiplatform.googleapis.com") &&
      !isGoogleApiHost("googleapis.com") &&
      !isGoogleApiHost("evilgoogleapis.com") &&
      !isGoogleApiHost("pubsub.mtls.googleapis.com"),
  );
  assert.ok(isGoogleSignedUrl("/o?GoogleAccessId=a&Signature=b&Expires=1") && !isGoogleSignedUrl("/o?alt=media"));
});

test("compatibility credentials carry a throwaway key, the real email and project, never the real key", () => {
  const real = parseServiceAccountJson(sa.json);
  const files = googleCompatFiles(real);
  const [path, content] = Object.entries(files)[0];
  const compat = JSON.parse(content) as Record<string, string>;
  assert.equal(compat.type, "service_account");
  assert.equal(compat.client_email, sa.clientEmail);
  assert.equal(compat.project_id, "wharf-test-project");
  assert.equal(compat.token_uri, "https://oauth2.googleapis.com/token");
  assert.notEqual(compat.private_key, sa.privateKeyPem);
  assert.ok(!content.includes(sa.privateKeyPem.split("\n")[1]));
  assert.equal(googleCompatEnv(real).GOOGLE_APPLICATION_CREDENTIALS, path);
  assert.equal(googleCompatEnv(real).GOOGLE_CLOUD_PROJECT, "wharf-test-project");
});

test("metadata-server emulation: Metadata-Flavor required both ways, dummy token, identity", () => {
  const id = {
    clientEmail: sa.clientEmail,
    projectId: "wharf-test-project",
    scopes: SCOPES,
    universeDomain: "googleapis.com",
  };
  const flavor: [string, string][] = [["Metadata-Flavor", "Google"]];
  const token = handleMetadataRequest(
    "GET",
    "/computeMetadata/v1/instance/service-accounts/default/token?scopes=x",
    flavor,
    id,
  );
  assert.equal(token.status, 200);
  assert.equal(token.headers["metadata-flavor"], "Google");
  assert.equal(JSON.parse(token.body).access_token, GOOGLE_COMPAT_ACCESS_TOKEN);
  assert.equal(
    handleMetadataRequest("GET", "/computeMetadata/v1/instance/service-accounts/default/token", [], id).status,
    403,
  );
  assert.equal(
    handleMetadataRequest(
      "GET",
      "/computeMetadata/v1/instance/service-accounts/default/token",
      [...flavor, ["X-Forwarded-For", "1.2.3.4"]],
      id,
    ).status,
    403,
  );
  assert.equal(
    handleMetadataRequest("GET", "/computeMetadata/v1/project/project-id", flavor, id).body,
    "wharf-test-project",
  );
  assert.equal(
    handleMetadataRequest(
      "GET",
      `/computeMetadata/v1/instance/service-accounts/${encodeURIComponent(sa.clientEmail)}/email`,
      flavor,
      id,
    ).body,
    sa.clientEmail,
  );
  assert.equal(
    handleMetadataRequest(
      "GET",
      "/computeMetadata/v1/instance/service-accounts/other@x.iam.gserviceaccount.com/token",
      flavor,
      id,
    ).status,
    404,
  );
  assert.equal(
    handleMetadataRequest(
      "GET",
      "/computeMetadata/v1/instance/service-accounts/default/identity?audience=x",
      flavor,
      id,
    ).status,
    404,
  );
});
