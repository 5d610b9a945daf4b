/**
 * Regression: a 25 MiB download through interception by the unmodified AWS SDK v3 S3 client, from
 * a signature-checking S3 stand-in that closes every connection after its answer, read slowly by
 * the client. undici 7's HTTP/1.1 parser asserted (`!this.paused`) and took the process down when
 * such a response ended while backpressure had it paused.
 */
import assert from "node:assert/strict";
import crypto from "node:crypto";
import https from "node:https";
import tls from "node:tls";
import { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { test } from "node:test";
import { GetObjectCommand, PutObjectCommand, S3Client } from "@aws-sdk/client-s3";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { createCloudAuthorizerFactory } from "../../src/egress/credentials/cloud-authorizer.ts";
import {
  AWS_PLACEHOLDER_ACCESS_KEY_ID,
  AWS_PLACEHOLDER_SECRET_ACCESS_KEY,
} from "../../src/egress/credentials/cloud/placeholder-credentials.ts";
import { loadEgressSettings } from "../../src/egress/egress-settings.ts";
import { startVerifyingS3 } from "./cloud/support/s3-verifying-server.ts";
import { policyFrom, startProxy } from "./support/proxy.ts";
import { hostsSetting, startTlsFront, startUpstreams } from "./support/upstreams.ts";

const REAL = { accessKeyId: "AKIAREALKEYFORTESTS9", secretAccessKey: crypto.randomBytes(30).toString("base64") };
const HOST = "s3.us-west-2.amazonaws.com";
const SIZE = 25 * 1024 * 1024;

test("25 MiB GetObject through interception with Connection: close and a slow reader", async (t) => {
  const up = await startUpstreams(t, ["api.test"]);
  const s3 = await startVerifyingS3(REAL);
  t.after(() => s3.close());
  const front = await startTlsFront(t, up, [HOST], "127.0.0.1", s3.port);
  const env = {
    WHARF_EGRESS_HOSTS: [hostsSetting(up, ["api.test"]), ...front].join(","),
    WHARF_EGRESS_ALLOW_INTERNAL: `${up.address}/32`,
    WHARF_EGRESS_UPSTREAM_CA_FILE: up.caFile,
    WHARF_EGRESS_SYSTEM_DNS: "0",
  };
  const config = {
    rules: [
      {
        name: "aws",
        type: "cloud_a",
        cloud_a: {
          access_key_id: { type: "opaque", value: REAL.accessKeyId },
          secret_access_key: { type: "opaque", value: REAL.secretAccessKey },
        },
      },
    ],
  };
  const policy = await policyFrom(config);
  const p0 = await startProxy(t, up, config, { env });
  const factory = createCloudAuthorizerFactory({
    targets: p0.proxy.targets,
    settings: loadEgressSettings({ ...process.env, ...env }),
  });
  p0.proxy.setPolicy(
    "sb1",
    policy,
    factory({ id: "sb1", workspaceId: "ws1" }, policy, (e) =>
      p0.audit.record({ ...e, sandboxId: "sb1", workspaceId: "ws1" } as never),
    ).authorizers,
  );
  const port = await p0.transparent(HOST, 443);

  // The sandbox's view: S3 at its real name, reached through the captured port, trusting the sandbox CA.
  const agent = new https.Agent({ keepAlive: true, ca: p0.sandboxCaPem });
  (agent as unknown as { createConnection: (o: tls.ConnectionOptions) => tls.TLSSocket }).createConnection = (o) =>
    tls.connect({ ...o, host: "127.0.0.1", port, servername: HOST });
  t.after(() => agent.destroy());
  const client = new S3Client({
    region: "us-west-2",
    credentials: { accessKeyId: AWS_PLACEHOLDER_ACCESS_KEY_ID, secretAccessKey: AWS_PLACEHOLDER_SECRET_ACCESS_KEY },
    forcePathStyle: true,
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler({ httpsAgent: agent }),
  });
  t.after(() => client.destroy());

  const body = crypto.randomBytes(SIZE);
  s3.objects.set("bucket/big.bin", body);
  s3.closeConnections = true;
  for (let round = 0; round < 2; round++) {
    const got = await client.send(new GetObjectCommand({ Bucket: "bucket", Key: "big.bin" }));
    const hash = crypto.createHash("sha256");
    let n = 0;
    // A slow reader: the proxy's response to the sandbox backs up and undici is held back.
    await pipeline(
      got.Body as NodeJS.ReadableStream,
      new Writable({
        highWaterMark: 64 * 1024,
        write(chunk: Buffer, _enc, cb) {
          hash.update(chunk);
          n += chunk.length;
          if (n % (4 * 1024 * 1024) < chunk.length) setTimeout(cb, 30);
          else cb();
        },
      }),
    );
    assert.equal(n, SIZE);
    assert.equal(hash.digest("hex"), crypto.createHash("sha256").update(body).digest("hex"));
  }
  assert.ok(
    s3.requests.every((r) => r.status === 200),
    "every request carried a valid signature with the real key",
  );
  assert.ok(p0.audit.events.some((e) => e.kind === "sign" && e.decision === "signed"));
  // Small uploads too, still through the re-signing path.
  await client.send(new PutObjectCommand({ Bucket: "bucket", Key: "small.txt", Body: "hello" }));
  assert.equal(s3.objects.get("bucket/small.txt")?.toString(), "hello");
});
