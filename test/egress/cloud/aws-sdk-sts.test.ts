/**
 * A non-S3 service: the unmodified AWS SDK v3 STS client with the placeholder credentials, through
 * the re-signing hop, to an STS stand-in verifying SigV4 with non-S3 rules (path encoded twice,
 * payload hashed from the body when the client does not send x-amz-content-sha256).
 */
import assert from "node:assert/strict";
import crypto from "node:crypto";
import https from "node:https";
import { after, before, test } from "node:test";
import { GetCallerIdentityCommand, STSClient } from "@aws-sdk/client-sts";
import { Hash } from "@smithy/hash-node";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { SignatureV4 } from "@smithy/signature-v4";
import { createAwsSigningEngine } from "../../../src/egress/credentials/cloud/aws-signing-engine.ts";
import {
  AWS_PLACEHOLDER_ACCESS_KEY_ID,
  AWS_PLACEHOLDER_SECRET_ACCESS_KEY,
} from "../../../src/egress/credentials/cloud/placeholder-credentials.ts";
import { routedAgent, startResigningHop, type Hop } from "./support/resigning-hop.ts";
import { startVerifyingSts } from "./support/sts-verifying-server.ts";
import { createTestCa } from "./support/test-tls.ts";

const REAL = { accessKeyId: "AKIAREALKEYFORSTS001", secretAccessKey: crypto.randomBytes(30).toString("base64") };
let sts: Awaited<ReturnType<typeof startVerifyingSts>>;
let hop: Hop;
let agent: https.Agent;

before(async () => {
  sts = await startVerifyingSts(REAL);
  const ca = await createTestCa();
  const leaf = await ca.issue(["sts.us-east-1.amazonaws.com", "sts.amazonaws.com", "sts.eu-west-3.amazonaws.com"]);
  hop = await startResigningHop({
    cert: leaf.cert,
    key: leaf.key,
    engine: createAwsSigningEngine({ credentials: REAL }),
    upstreamPort: sts.port,
  });
  agent = routedAgent(hop.port, ca.caPem);
});
after(async () => {
  agent?.destroy();
  await hop?.close();
  await sts?.close();
});

for (const region of ["us-east-1", "eu-west-3"]) {
  test(`STS GetCallerIdentity (${region}) re-signed for a non-S3 service`, async () => {
    const client = new STSClient({
      region,
      credentials: { accessKeyId: AWS_PLACEHOLDER_ACCESS_KEY_ID, secretAccessKey: AWS_PLACEHOLDER_SECRET_ACCESS_KEY },
      maxAttempts: 1,
      requestHandler: new NodeHttpHandler({ httpsAgent: agent }),
    });
    const id = await client.send(new GetCallerIdentityCommand({}));
    assert.equal(id.Account, "123456789012");
    assert.equal(sts.log.at(-1)?.status, 200);
    // SDK v3 sends x-amz-content-sha256 for every service: the body streams, unbuffered.
    assert.equal(hop.outcomes.at(-1), "signed:literal-hash");
    client.destroy();
  });
}

test("a client that signs a body hash it does not send (botocore-style) is re-signed from the buffered body", async () => {
  const body = "Action=GetCallerIdentity&Version=2011-06-15";
  const host = "sts.eu-west-3.amazonaws.com";
  const signer = new SignatureV4({
    service: "sts",
    region: "eu-west-3",
    applyChecksum: false,
    sha256: Hash.bind(null, "sha256"),
    credentials: { accessKeyId: AWS_PLACEHOLDER_ACCESS_KEY_ID, secretAccessKey: AWS_PLACEHOLDER_SECRET_ACCESS_KEY },
  });
  const signed = (await signer.sign({
    method: "POST",
    protocol: "https:",
    hostname: host,
    path: "/",
    query: {},
    body,
    headers: {
      host,
      "content-type": "application/x-www-form-urlencoded; charset=utf-8",
      "content-length": String(body.length),
    },
  } as never)) as unknown as { headers: Record<string, string> };
  assert.equal(signed.headers["x-amz-content-sha256"], undefined);
  const status = await new Promise<number>((resolve, reject) => {
    const req = https.request({ host, method: "POST", path: "/", headers: signed.headers, agent }, (res) => {
      res.resume();
      res.on("end", () => resolve(res.statusCode ?? 0));
    });
    req.on("error", reject);
    req.end(body);
  });
  assert.equal(status, 200, JSON.stringify(sts.log.at(-1)));
  assert.equal(sts.log.at(-1)?.sentContentSha, false);
  assert.equal(hop.outcomes.at(-1), "signed:computed-hash");
});

test("the stand-in rejects the placeholder signature itself (the hop really re-signed)", async () => {
  const direct = new STSClient({
    region: "us-east-1",
    endpoint: `http://127.0.0.1:${sts.port}`,
    credentials: { accessKeyId: AWS_PLACEHOLDER_ACCESS_KEY_ID, secretAccessKey: AWS_PLACEHOLDER_SECRET_ACCESS_KEY },
    maxAttempts: 1,
  });
  await assert.rejects(direct.send(new GetCallerIdentityCommand({})), (e: Error) => e.name === "InvalidClientTokenId");
  const real = new STSClient({
    region: "us-east-1",
    endpoint: `http://127.0.0.1:${sts.port}`,
    credentials: REAL,
    maxAttempts: 1,
  });
  assert.equal((await real.send(new GetCallerIdentityCommand({}))).Account, "123456789012");
  direct.destroy();
  real.destroy();
});
