/** What a sandbox gets from its cloud rules: engines only for enabled rules, compatibility values only. */
import assert from "node:assert/strict";
import { test } from "node:test";
import { createCloudEngines } from "../../../src/egress/credentials/cloud/cloud-engines.ts";
import { makeServiceAccount } from "./support/google-stand-ins.ts";

const AWS_REAL = { accessKeyId: "AKIAREALREALREALREAL", secretAccessKey: "Zr3al/secret+value/that-must-stay-outside" };

test("disabled or absent rules yield no engine and put nothing in the sandbox", () => {
  const none = createCloudEngines({}, { audit: () => {} });
  assert.deepEqual([none.aws, none.google, none.env, none.files, none.metadataIdentity], [null, null, {}, {}, null]);
  const disabled = createCloudEngines(
    { cloudA: { enabled: false, ...AWS_REAL }, cloudB: { enabled: false, serviceAccountJson: "{}", scopes: ["s"] } },
    { audit: () => {} },
  );
  assert.deepEqual([disabled.aws, disabled.google, disabled.env, disabled.files], [null, null, {}, {}]);
});

test("enabled rules: engines built, and the sandbox's env and files hold no real key", () => {
  const sa = makeServiceAccount("https://oauth2.googleapis.com/token");
  const engines = createCloudEngines(
    {
      cloudA: { enabled: true, ...AWS_REAL },
      cloudB: {
        enabled: true,
        serviceAccountJson: sa.json,
        scopes: ["https://www.googleapis.com/auth/cloud-platform"],
      },
    },
    { audit: () => {} },
    "/home/agent",
  );
  assert.ok(engines.aws && engines.google);
  assert.equal(engines.env.AWS_ACCESS_KEY_ID, "AKIAWHARFPLACEHOLDER");
  assert.ok(engines.files["/home/agent/.aws/credentials"]);
  assert.ok(engines.files["/etc/wharf/google-service-account.json"]);
  const sandboxView = JSON.stringify([engines.env, engines.files]);
  assert.ok(!sandboxView.includes(AWS_REAL.accessKeyId) && !sandboxView.includes(AWS_REAL.secretAccessKey));
  assert.ok(!sandboxView.replace(/\\n/g, "\n").includes(sa.privateKeyPem.split("\n")[5]));
  assert.equal(engines.metadataIdentity?.clientEmail, sa.clientEmail);
});
