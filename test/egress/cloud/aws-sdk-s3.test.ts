/**
 * The unmodified AWS SDK v3 S3 client, holding only the sandbox's placeholder credentials, over
 * HTTPS through a hop that applies the AWS engine as the proxy does, to an S3 stand-in that checks
 * every signature (header, chunk, trailer) with the real keys using its own SigV4 implementation.
 */
import assert from "node:assert/strict";
import crypto from "node:crypto";
import https from "node:https";
import { after, before, test } from "node:test";
import {
  CreateBucketCommand,
  GetObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
} from "@aws-sdk/client-s3";
import { Upload } from "@aws-sdk/lib-storage";
import { Hash } from "@smithy/hash-node";
import { SignatureV4 } from "@smithy/signature-v4";
import { NodeHttpHandler } from "@smithy/node-http-handler";
import { Readable } from "node:stream";
import { createAwsSigningEngine } from "../../../src/egress/credentials/cloud/aws-signing-engine.ts";
import type { CloudAuditEvent } from "../../../src/egress/credentials/cloud/cloud-audit.ts";
import {
  AWS_PLACEHOLDER_ACCESS_KEY_ID,
  AWS_PLACEHOLDER_SECRET_ACCESS_KEY,
} from "../../../src/egress/credentials/cloud/placeholder-credentials.ts";
import { routedAgent, startResigningHop, type Hop } from "./support/resigning-hop.ts";
import { startVerifyingS3, type VerifyingS3 } from "./support/s3-verifying-server.ts";
import { createTestCa } from "./support/test-tls.ts";

const REAL = { accessKeyId: "AKIAREALKEYFORTESTS1", secretAccessKey: crypto.randomBytes(30).toString("base64") };
const PLACEHOLDER = { accessKeyId: AWS_PLACEHOLDER_ACCESS_KEY_ID, secretAccessKey: AWS_PLACEHOLDER_SECRET_ACCESS_KEY };
const BUCKET = "wharf-test-bucket";

let s3: VerifyingS3;
let hop: Hop;
let agent: https.Agent;
let caPem: string;
const events: CloudAuditEvent[] = [];

function client(credentials = PLACEHOLDER, endpoint?: string): S3Client {
  return new S3Client({
    region: "us-west-2",
    credentials,
    endpoint,
    forcePathStyle: endpoint !== undefined,
    maxAttempts: 1,
    requestHandler: new NodeHttpHandler({ httpsAgent: agent }),
  });
}

before(async () => {
  s3 = await startVerifyingS3(REAL);
  const ca = await createTestCa();
  caPem = ca.caPem;
  const leaf = await ca.issue(["s3.us-west-2.amazonaws.com", "*.s3.us-west-2.amazonaws.com", "s3.storage.example.net"]);
  const engine = createAwsSigningEngine({ credentials: REAL, audit: (e) => events.push(e) });
  hop = await startResigningHop({ cert: leaf.cert, key: leaf.key, engine, upstreamPort: s3.port });
  agent = routedAgent(hop.port, caPem);
  await client().send(new CreateBucketCommand({ Bucket: BUCKET }));
});

after(async () => {
  agent?.destroy();
  await hop?.close();
  await s3?.close();
});

test("the verifying server agrees with the SDK's own signer (real keys direct) and rejects the placeholder", async () => {
  const direct = new S3Client({
    region: "us-west-2",
    credentials: REAL,
    endpoint: `http://127.0.0.1:${s3.port}`,
    forcePathStyle: true,
    maxAttempts: 1,
  });
  await direct.send(new PutObjectCommand({ Bucket: BUCKET, Key: "direct.txt", Body: "direct" }));
  const placeholderDirect = new S3Client({
    region: "us-west-2",
    credentials: PLACEHOLDER,
    endpoint: `http://127.0.0.1:${s3.port}`,
    forcePathStyle: true,
    maxAttempts: 1,
  });
  await assert.rejects(
    placeholderDirect.send(new PutObjectCommand({ Bucket: BUCKET, Key: "x", Body: "x" })),
    (e: Error) => e.name === "InvalidAccessKeyId",
  );
  direct.destroy();
  placeholderDirect.destroy();
});

test("PutObject with the SDK's default checksum streaming (aws-chunked + CRC32 trailer), then GetObject", async () => {
  const payload = crypto.randomBytes(300 * 1024);
  const before = s3.requests.length;
  await client().send(
    new PutObjectCommand({
      Bucket: BUCKET,
      Key: "stream/object.bin",
      Body: Readable.from([payload.subarray(0, 100_000), payload.subarray(100_000)]),
      ContentLength: payload.length,
    }),
  );
  const put = s3.requests.slice(before).find((r) => r.method === "PUT")!;
  assert.equal(put.status, 200, put.error);
  assert.equal(put.payloadMode, "STREAMING-UNSIGNED-PAYLOAD-TRAILER");
  assert.equal(put.verifiedChecksum, "x-amz-checksum-crc32");
  assert.ok(hop.outcomes.includes("signed:streaming-unsigned-trailer"));
  const got = await client().send(new GetObjectCommand({ Bucket: BUCKET, Key: "stream/object.bin" }));
  assert.ok(Buffer.from(await got.Body!.transformToByteArray()).equals(payload));
  // A buffer body too (the SDK picks its mode; whatever it is, it must verify).
  await client().send(new PutObjectCommand({ Bucket: BUCKET, Key: "small.txt", Body: "hello" }));
  assert.equal(s3.objects.get(`${BUCKET}/small.txt`)?.toString(), "hello");
});

test("multipart upload of a 12 MiB object with @aws-sdk/lib-storage", async () => {
  const payload = crypto.randomBytes(12 * 1024 * 1024);
  const upload = new Upload({
    client: client(),
    params: { Bucket: BUCKET, Key: "big/multi part.bin", Body: payload },
    partSize: 5 * 1024 * 1024,
    queueSize: 2,
  });
  await upload.done();
  assert.ok(s3.objects.get(`${BUCKET}/big/multi part.bin`)?.equals(payload));
  const parts = s3.requests.filter((r) => r.target.includes("partNumber="));
  assert.ok(parts.length >= 3 && parts.every((r) => r.status === 200), JSON.stringify(parts.map((p) => p.error)));
});

test("ListObjectsV2 and GetObject with keys containing spaces, +, %, unicode and //", async () => {
  const keys = ["odd/a b.txt", "odd/a+b.txt", "odd/100%.txt", "odd/über ✓ 日本.txt", "odd/x//y.txt", "odd/q?&=#.txt"];
  for (const Key of keys) await client().send(new PutObjectCommand({ Bucket: BUCKET, Key, Body: Key }));
  const listed = await client().send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: "odd/" }));
  assert.deepEqual((listed.Contents ?? []).map((c) => c.Key).sort(), [...keys].sort());
  const plus = await client().send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: "odd/a+" }));
  assert.deepEqual(
    (plus.Contents ?? []).map((c) => c.Key),
    ["odd/a+b.txt"],
  );
  const pct = await client().send(new ListObjectsV2Command({ Bucket: BUCKET, Prefix: "odd/100%" }));
  assert.deepEqual(
    (pct.Contents ?? []).map((c) => c.Key),
    ["odd/100%.txt"],
  );
  for (const Key of keys) {
    const got = await client().send(new GetObjectCommand({ Bucket: BUCKET, Key }));
    assert.equal(await got.Body!.transformToString(), Key);
  }
});

test("a request signed with any other key passes untouched and fails at the server", async () => {
  const other = { accessKeyId: "AKIAOTHERKEYOTHERKEY", secretAccessKey: "other-secret" };
  await assert.rejects(
    client(other).send(new GetObjectCommand({ Bucket: BUCKET, Key: "small.txt" })),
    (e: Error) => e.name === "InvalidAccessKeyId",
  );
  assert.equal(hop.outcomes.at(-1), "pass");
});

test("a placeholder-signed request to a non-AWS host is not signed", async () => {
  await assert.rejects(
    client(PLACEHOLDER, "https://s3.storage.example.net").send(
      new GetObjectCommand({ Bucket: BUCKET, Key: "small.txt" }),
    ),
    (e: Error) => e.name === "InvalidAccessKeyId",
  );
  assert.equal(hop.outcomes.at(-1), "pass");
});

test("a presigned URL made with the placeholder key is refused with a clear reason", async () => {
  const signer = new SignatureV4({
    service: "s3",
    region: "us-west-2",
    credentials: PLACEHOLDER,
    sha256: Hash.bind(null, "sha256"),
    uriEscapePath: false,
  });
  const presigned = await signer.presign({
    method: "GET",
    protocol: "https:",
    hostname: `${BUCKET}.s3.us-west-2.amazonaws.com`,
    path: "/small.txt",
    headers: { host: `${BUCKET}.s3.us-west-2.amazonaws.com` },
    query: {},
  } as never);
  const query = Object.entries(presigned.query as Record<string, string>)
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
    .join("&");
  const { status, body } = await new Promise<{ status: number; body: string }>((resolve, reject) => {
    https
      .get({ host: `${BUCKET}.s3.us-west-2.amazonaws.com`, path: `/small.txt?${query}`, agent }, (res) => {
        let body = "";
        res.on("data", (d) => (body += d));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, body }));
      })
      .on("error", reject);
  });
  assert.equal(status, 403);
  assert.match(body, /<Code>WharfEgressRefused<\/Code>.*presigned URLs/);
  assert.ok(events.some((e) => e.kind === "aws_refused" && e.reason === "presigned_url"));
});

test("the audit log names what was signed and never holds a key", () => {
  const signed = events.filter((e) => e.kind === "aws_signed");
  assert.ok(signed.length >= 10);
  assert.ok(signed.every((e) => e.kind === "aws_signed" && e.service === "s3" && e.region === "us-west-2"));
  const text = JSON.stringify(events);
  assert.ok(!text.includes(REAL.secretAccessKey) && !text.includes(REAL.accessKeyId));
});
