/** The AWS engine's decisions: what passes untouched, what is refused and why, what is re-signed how. */
import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { test } from "node:test";
import { awsRefusalResponse } from "../../../src/egress/credentials/cloud/aws-refusal.ts";
import {
  createAwsSigningEngine,
  type AwsOutboundRequest,
} from "../../../src/egress/credentials/cloud/aws-signing-engine.ts";
import { isAwsHost } from "../../../src/egress/credentials/cloud/aws-hosts.ts";
import type { CloudAuditEvent } from "../../../src/egress/credentials/cloud/cloud-audit.ts";
import {
  AWS_PLACEHOLDER_ACCESS_KEY_ID,
  awsCompatEnv,
  awsCompatFiles,
} from "../../../src/egress/credentials/cloud/placeholder-credentials.ts";

const REAL = { accessKeyId: "AKIAREALREALREALREAL", secretAccessKey: "real-secret-real-secret-real-secret-0000" };
const JUNK = "0".repeat(64);
const auth = (akid = AWS_PLACEHOLDER_ACCESS_KEY_ID, signed = "host;x-amz-content-sha256;x-amz-date") =>
  `AWS4-HMAC-SHA256 Credential=${akid}/20240101/us-west-2/s3/aws4_request, SignedHeaders=${signed}, Signature=${JUNK}`;

function req(over: Partial<AwsOutboundRequest> & { sha?: string | null; akid?: string } = {}): AwsOutboundRequest {
  const headers: AwsOutboundRequest["headers"] = [
    ["Host", "bkt.s3.us-west-2.amazonaws.com"],
    ["X-Amz-Date", "20240101T000000Z"],
    ["Authorization", auth(over.akid)],
  ];
  if (over.sha !== null) headers.push(["X-Amz-Content-Sha256", over.sha ?? "UNSIGNED-PAYLOAD"]);
  return { method: "PUT", host: "bkt.s3.us-west-2.amazonaws.com", target: "/key", headers, body: null, ...over };
}

function engineWithAudit(opts: { maxBufferedPayloadBytes?: number } = {}) {
  const events: CloudAuditEvent[] = [];
  return { engine: createAwsSigningEngine({ credentials: REAL, audit: (e) => events.push(e), ...opts }), events };
}

test("AWS hosts: strict subdomains of the AWS suffixes only", () => {
  for (const h of [
    "s3.amazonaws.com",
    "bkt.s3.us-west-2.amazonaws.com",
    "sts.amazonaws.com",
    "iam.cn-north-1.amazonaws.com.cn",
    "s3.dualstack.eu-west-1.api.aws",
    "abc.lambda-url.us-east-1.on.aws",
  ])
    assert.ok(isAwsHost(h), h);
  for (const h of ["amazonaws.com", "evilamazonaws.com", "amazonaws.com.evil.net", "example.com", "api.aws"])
    assert.ok(!isAwsHost(h), h);
  assert.ok(isAwsHost("minio.corp.internal", ["corp.internal"]));
});

test("a request signed with another key, unsigned, or to a non-AWS host passes untouched and unaudited", async () => {
  const { engine, events } = engineWithAudit();
  assert.deepEqual(await engine.handle(req({ akid: "AKIAOTHEROTHEROTHER1" })), { action: "pass" });
  assert.deepEqual(await engine.handle({ ...req(), headers: [["Host", "x"]] }), { action: "pass" });
  assert.deepEqual(await engine.handle({ ...req(), host: "storage.example.com" }), { action: "pass" });
  // A presigned URL handed to the agent by some other service (a real key) passes too.
  assert.deepEqual(
    await engine.handle({
      ...req(),
      headers: [["Host", "b"]],
      target:
        "/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAOTHEROTHEROTHER1%2F20240101%2Fus-west-2%2Fs3%2Faws4_request&X-Amz-Signature=abc",
    }),
    { action: "pass" },
  );
  assert.equal(events.length, 0);
});

test("presigned URLs, SigV4a and SigV2 made with the placeholder key are refused with a clear reason, audited", async () => {
  const { engine, events } = engineWithAudit();
  const presigned = await engine.handle({
    ...req(),
    headers: [["Host", "b"]],
    target: `/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=${AWS_PLACEHOLDER_ACCESS_KEY_ID}%2F20240101%2Fus-west-2%2Fs3%2Faws4_request&X-Amz-Signature=abc`,
  });
  assert.equal(presigned.action, "refuse");
  if (presigned.action === "refuse") {
    assert.equal(presigned.refusal.reason, "presigned_url");
    const answer = awsRefusalResponse(presigned.refusal);
    assert.equal(answer.status, 403);
    assert.match(answer.body, /<Code>WharfEgressRefused<\/Code><Message>wharf egress proxy: presigned URLs/);
  }
  const v4a = await engine.handle({
    ...req(),
    headers: [
      ["Host", "b"],
      [
        "Authorization",
        `AWS4-ECDSA-P256-SHA256 Credential=${AWS_PLACEHOLDER_ACCESS_KEY_ID}/20240101/s3/aws4_request, SignedHeaders=host, Signature=3045`,
      ],
    ],
  });
  assert.equal(v4a.action === "refuse" && v4a.refusal.reason, "sigv4a");
  const v2 = await engine.handle({
    ...req(),
    headers: [
      ["Host", "b"],
      ["Authorization", `AWS ${AWS_PLACEHOLDER_ACCESS_KEY_ID}:c2lnbmF0dXJl`],
    ],
  });
  assert.equal(v2.action === "refuse" && v2.refusal.reason, "sigv2");
  assert.deepEqual(
    events.map((e) => e.kind === "aws_refused" && e.reason),
    ["presigned_url", "sigv4a", "sigv2"],
  );
  assert.ok(
    !JSON.stringify(events).includes(REAL.secretAccessKey) && !JSON.stringify(events).includes(REAL.accessKeyId),
  );
});

test("malformed signatures, a missing signed header or X-Amz-Date are refused (400)", async () => {
  const { engine } = engineWithAudit();
  const bad = await engine.handle({
    ...req(),
    headers: [
      ["Host", "b"],
      [
        "Authorization",
        `AWS4-HMAC-SHA256 Credential=${AWS_PLACEHOLDER_ACCESS_KEY_ID}/2024/us-west-2/s3, SignedHeaders=host, Signature=${JUNK}`,
      ],
    ],
  });
  assert.equal(bad.action === "refuse" && bad.refusal.status, 400);
  const missing = await engine.handle({
    ...req(),
    headers: [
      ["Host", "b"],
      ["X-Amz-Date", "20240101T000000Z"],
      ["X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD"],
      ["Authorization", auth(undefined, "host;x-amz-content-sha256;x-amz-date;x-amz-meta-a")],
    ],
  });
  assert.equal(missing.action === "refuse" && missing.refusal.reason, "missing_signed_header");
  const noDate = await engine.handle({
    ...req(),
    headers: [
      ["Host", "b"],
      ["X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD"],
      ["Authorization", auth(undefined, "host;x-amz-content-sha256")],
    ],
  });
  assert.equal(noDate.action === "refuse" && noDate.refusal.reason, "missing_amz_date");
  const badQuery = await engine.handle({ ...req(), target: "/k?a=%zz" });
  assert.equal(badQuery.action === "refuse" && badQuery.refusal.reason, "malformed_query");
});

test("UNSIGNED-PAYLOAD, unsigned trailers and literal hashes keep the body stream itself (no buffering)", async () => {
  const { engine, events } = engineWithAudit({ maxBufferedPayloadBytes: 4 });
  for (const [sha, mode] of [
    ["UNSIGNED-PAYLOAD", "unsigned"],
    ["STREAMING-UNSIGNED-PAYLOAD-TRAILER", "streaming-unsigned-trailer"],
    ["a".repeat(64), "literal-hash"],
  ] as const) {
    const body = Readable.from([Buffer.alloc(1024)]);
    const out = await engine.handle({ ...req({ sha }), body });
    assert.equal(out.action, "signed");
    if (out.action !== "signed") continue;
    assert.equal(out.body, body, "the very same stream, untouched");
    assert.equal(out.payloadMode, mode);
    const a = out.headers.find(([n]) => n === "Authorization")![1];
    assert.match(
      a,
      /^AWS4-HMAC-SHA256 Credential=AKIAREALREALREALREAL\/20240101\/us-west-2\/s3\/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature=[0-9a-f]{64}$/,
    );
  }
  assert.deepEqual(
    events.map((e) => e.kind),
    ["aws_signed", "aws_signed", "aws_signed"],
  );
});

test("without x-amz-content-sha256 the body is hashed by the proxy up to the cap, then refused with 413", async () => {
  const { engine, events } = engineWithAudit({ maxBufferedPayloadBytes: 1000 });
  const signed = "host;x-amz-date";
  const base = {
    ...req({ sha: null }),
    headers: [
      ["Host", "b"],
      ["X-Amz-Date", "20240101T000000Z"],
      ["Authorization", auth(undefined, signed)],
    ] as [string, string][],
  };
  const ok = await engine.handle({ ...base, body: Readable.from([Buffer.alloc(1000)]) });
  assert.equal(ok.action === "signed" && ok.payloadMode, "computed-hash");
  const big = await engine.handle({ ...base, body: Readable.from([Buffer.alloc(600), Buffer.alloc(600)]) });
  assert.equal(big.action, "refuse");
  if (big.action === "refuse") {
    assert.equal(big.refusal.status, 413);
    assert.match(big.refusal.message, /exceeds the 1000-byte limit; send x-amz-content-sha256/);
  }
  assert.equal(events.at(-1)?.kind, "aws_refused");
});

test("a placeholder session token is dropped from the request and from SignedHeaders", async () => {
  const { engine } = engineWithAudit();
  const r = req();
  r.headers.push(["X-Amz-Security-Token", "placeholder-token"]);
  r.headers = r.headers.map(([n, v]) =>
    n === "Authorization" ? [n, auth(undefined, "host;x-amz-content-sha256;x-amz-date;x-amz-security-token")] : [n, v],
  );
  const out = await engine.handle(r);
  assert.equal(out.action, "signed");
  if (out.action !== "signed") return;
  assert.ok(!out.headers.some(([n]) => n.toLowerCase() === "x-amz-security-token"));
  assert.match(
    out.headers.find(([n]) => n === "Authorization")![1],
    /SignedHeaders=host;x-amz-content-sha256;x-amz-date,/,
  );
});

test("a broken aws-chunked body fails the stream (and is audited) instead of forwarding bad bytes", async () => {
  const { engine, events } = engineWithAudit();
  for (const bad of [
    "zz;chunk-signature=" + JUNK + "\r\n",
    "5;chunk-signature=" + JUNK + "\r\nabcdeXY",
    "5;chunk-signature=" + JUNK + "\r\nabc",
  ]) {
    const out = await engine.handle({
      ...req({ sha: "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" }),
      body: Readable.from([Buffer.from(bad)]),
    });
    assert.equal(out.action, "signed");
    if (out.action !== "signed") continue;
    await assert.rejects(async () => {
      for await (const _ of out.body!) void _;
    }, /aws-chunked|chunk/);
  }
  assert.equal(events.filter((e) => e.kind === "aws_stream_failed").length, 3);
  const huge = await engine.handle({
    ...req({ sha: "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" }),
    body: Readable.from([Buffer.from(`ffffffff;chunk-signature=${JUNK}\r\n`)]),
  });
  if (huge.action === "signed")
    await assert.rejects(async () => {
      for await (const _ of huge.body!) void _;
    }, /exceeds the proxy's limit/);
});

test("compatibility placeholders: env and ~/.aws/credentials carry only the public placeholder", () => {
  const env = awsCompatEnv();
  assert.equal(env.AWS_ACCESS_KEY_ID, AWS_PLACEHOLDER_ACCESS_KEY_ID);
  assert.equal(env.AWS_EC2_METADATA_DISABLED, "true");
  const files = awsCompatFiles("/home/agent/");
  assert.deepEqual(Object.keys(files), ["/home/agent/.aws/credentials"]);
  assert.match(files["/home/agent/.aws/credentials"], /^\[default\]\naws_access_key_id = AKIAWHARFPLACEHOLDER\n/);
});
