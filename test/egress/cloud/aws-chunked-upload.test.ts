/**
 * A chunk-signed streaming upload (`STREAMING-AWS4-HMAC-SHA256-PAYLOAD`, with and without a signed
 * trailer) produced by a client built here from the published algorithm, signed with the
 * placeholder key, re-signed chunk by chunk through the hop, and verified chunk by chunk (and
 * trailer) by the S3 stand-in holding the real keys.
 */
import assert from "node:assert/strict";
import crypto from "node:crypto";
import https from "node:https";
import { after, before, test } from "node:test";
import { Hash } from "@smithy/hash-node";
import { SignatureV4 } from "@smithy/signature-v4";
import { createAwsSigningEngine } from "../../../src/egress/credentials/cloud/aws-signing-engine.ts";
import {
  AWS_PLACEHOLDER_ACCESS_KEY_ID,
  AWS_PLACEHOLDER_SECRET_ACCESS_KEY,
} from "../../../src/egress/credentials/cloud/placeholder-credentials.ts";
import { Crc } from "./support/checksums.ts";
import { routedAgent, startResigningHop, type Hop } from "./support/resigning-hop.ts";
import { startVerifyingS3, type VerifyingS3 } from "./support/s3-verifying-server.ts";
import { createTestCa } from "./support/test-tls.ts";

const REAL = { accessKeyId: "AKIAREALKEYFORCHUNKS", secretAccessKey: crypto.randomBytes(30).toString("base64") };
const HOST = "chunks.s3.eu-central-1.amazonaws.com";
const EMPTY = crypto.createHash("sha256").digest("hex");
let s3: VerifyingS3;
let hop: Hop;
let agent: https.Agent;

before(async () => {
  s3 = await startVerifyingS3(REAL);
  const ca = await createTestCa();
  const leaf = await ca.issue(["*.s3.eu-central-1.amazonaws.com"]);
  hop = await startResigningHop({
    cert: leaf.cert,
    key: leaf.key,
    engine: createAwsSigningEngine({ credentials: REAL }),
    upstreamPort: s3.port,
  });
  agent = routedAgent(hop.port, ca.caPem);
});
after(async () => {
  agent?.destroy();
  await hop?.close();
  await s3?.close();
});

/** Builds the whole signed aws-chunked request the way SDKs with chunk signing do. */
async function chunkSignedRequest(
  key: string,
  payload: Buffer,
  chunkSize: number,
  trailer: boolean,
  secret = AWS_PLACEHOLDER_SECRET_ACCESS_KEY,
) {
  const mode = trailer ? "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER" : "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
  const chunks: Buffer[] = [];
  for (let i = 0; i < payload.length; i += chunkSize) chunks.push(payload.subarray(i, i + chunkSize));
  chunks.push(Buffer.alloc(0));
  const crcLine = trailer ? `x-amz-checksum-crc32c:${new Crc("crc32c").update(payload).base64()}` : "";
  const length =
    chunks.reduce((n, c) => n + c.length.toString(16).length + 17 + 64 + 2 + (c.length ? c.length + 2 : 0), 0) +
    (trailer ? crcLine.length + 2 + "x-amz-trailer-signature:".length + 64 + 2 : 0) +
    2;
  const headers: Record<string, string> = {
    host: HOST,
    "content-encoding": "aws-chunked",
    "content-length": String(length),
    "x-amz-content-sha256": mode,
    "x-amz-decoded-content-length": String(payload.length),
    "x-amz-storage-class": "STANDARD",
  };
  if (trailer) headers["x-amz-trailer"] = "x-amz-checksum-crc32c";
  const creds = { accessKeyId: AWS_PLACEHOLDER_ACCESS_KEY_ID, secretAccessKey: secret };
  const signer = new SignatureV4({
    service: "s3",
    region: "eu-central-1",
    credentials: creds,
    sha256: Hash.bind(null, "sha256"),
    uriEscapePath: false,
  });
  const date = new Date();
  const signed = (await signer.sign(
    { method: "PUT", protocol: "https:", hostname: HOST, path: `/${key}`, headers, query: {} } as never,
    { signingDate: date },
  )) as unknown as { headers: Record<string, string> };
  const sh = signed.headers;
  const seed = /Signature=([0-9a-f]{64})/.exec(sh.authorization)![1];
  const amzDate = sh["x-amz-date"];
  const scope = `${amzDate.slice(0, 8)}/eu-central-1/s3/aws4_request`;
  const h = (k: Buffer | string, d: string) => crypto.createHmac("sha256", k).update(d).digest();
  const signingKey = h(h(h(h(`AWS4${secret}`, amzDate.slice(0, 8)), "eu-central-1"), "s3"), "aws4_request");
  let prev = seed;
  const parts: Buffer[] = [];
  for (const c of chunks) {
    prev = h(
      signingKey,
      [
        "AWS4-HMAC-SHA256-PAYLOAD",
        amzDate,
        scope,
        prev,
        EMPTY,
        crypto.createHash("sha256").update(c).digest("hex"),
      ].join("\n"),
    ).toString("hex");
    parts.push(Buffer.from(`${c.length.toString(16)};chunk-signature=${prev}\r\n`), c);
    if (c.length) parts.push(Buffer.from("\r\n"));
  }
  if (trailer) {
    const trailerSig = h(
      signingKey,
      [
        "AWS4-HMAC-SHA256-TRAILER",
        amzDate,
        scope,
        prev,
        crypto.createHash("sha256").update(`${crcLine}\n`).digest("hex"),
      ].join("\n"),
    ).toString("hex");
    parts.push(Buffer.from(`${crcLine}\r\nx-amz-trailer-signature:${trailerSig}\r\n`));
  }
  parts.push(Buffer.from("\r\n"));
  const body = Buffer.concat(parts);
  assert.equal(body.length, length);
  return { headers: sh, body };
}

function send(key: string, headers: Record<string, string>, body: Buffer): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = https.request({ host: HOST, method: "PUT", path: `/${key}`, headers, agent }, (res) => {
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on("error", reject);
    // Uneven writes: the hop and the re-signer see chunk boundaries at random places.
    let off = 0;
    const step = () => {
      while (off < body.length) {
        const n = 1 + Math.floor(Math.random() * 40_000);
        const ok = req.write(body.subarray(off, off + n));
        off += n;
        if (!ok) return req.once("drain", step);
      }
      req.end();
    };
    step();
  });
}

for (const trailer of [false, true]) {
  test(`chunk-signed upload ${trailer ? "with a signed CRC32C trailer " : ""}is re-signed chunk by chunk and verified by the server`, async () => {
    const payload = crypto.randomBytes(1024 * 1024 + 12345);
    const key = `chunked/${trailer ? "trailer" : "plain"}.bin`;
    const { headers, body } = await chunkSignedRequest(key, payload, 64 * 1024, trailer);
    const res = await send(key, headers, body);
    assert.equal(res.status, 200, res.text);
    const rec = s3.requests.at(-1)!;
    assert.equal(rec.chunks, 18, "17 data chunks and the final one, each verified");
    if (trailer) assert.equal(rec.verifiedChecksum, "x-amz-checksum-crc32c");
    assert.ok(s3.objects.get(`chunks/${key}`)?.equals(payload));
    assert.equal(hop.outcomes.at(-1), trailer ? "signed:streaming-signed-trailer" : "signed:streaming-signed");
  });
}

test("a truncated chunked body never reaches the server as a complete object", async () => {
  const { headers, body } = await chunkSignedRequest("chunked/cut.bin", crypto.randomBytes(200_000), 64 * 1024, false);
  const cut = body.subarray(0, body.length - 200);
  const res = await send("chunked/cut.bin", { ...headers, "content-length": String(cut.length) }, cut).catch((e) => ({
    status: 0,
    text: String(e),
  }));
  assert.notEqual(res.status, 200);
  assert.ok(!s3.objects.has("chunks/chunked/cut.bin"));
});
