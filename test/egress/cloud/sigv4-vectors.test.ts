/**
 * The AWS SigV4 test suite (aws-sig-v4-test-suite, as packaged for the Smithy signer): the same
 * requests, credentials, date and expected signatures, restated as the wire requests the proxy
 * sees (a placeholder-signed Authorization, repeated header lines, an encoded query), re-signed
 * with the suite's credentials. Plus the chunk-signature example of the S3 streaming docs.
 */
import assert from "node:assert/strict";
import { Readable } from "node:stream";
import { test } from "node:test";
import { createAwsSigningEngine } from "../../../src/egress/credentials/cloud/aws-signing-engine.ts";
import { AWS_PLACEHOLDER_ACCESS_KEY_ID } from "../../../src/egress/credentials/cloud/placeholder-credentials.ts";
import { parseSigV4 } from "../../../src/egress/credentials/cloud/sigv4-parse.ts";
import { resignSigV4 } from "../../../src/egress/credentials/cloud/sigv4-resign.ts";
import type { HeaderPairs } from "../../../src/egress/credentials/cloud/header-pairs.ts";

const SUITE_CREDS = { accessKeyId: "AKIDEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY" };
const DATE = "20150830T123600Z";
const JUNK = "0".repeat(64);

function enc(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

interface Vector {
  name: string;
  method: string;
  path: string;
  query?: Array<[string, string]>;
  headers: HeaderPairs;
  signed: string;
  signature: string;
  body?: string;
}

const H = (extra: HeaderPairs = []): HeaderPairs => [["Host", "example.amazonaws.com"], ...extra, ["X-Amz-Date", DATE]];

const VECTORS: Vector[] = [
  {
    name: "get-vanilla",
    method: "GET",
    path: "/",
    headers: H(),
    signed: "host;x-amz-date",
    signature: "5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31",
  },
  {
    name: "get-header-key-duplicate (three header lines)",
    method: "GET",
    path: "/",
    headers: H([
      ["My-Header1", "value2"],
      ["My-Header1", "value2"],
      ["My-Header1", "value1"],
    ]),
    signed: "host;my-header1;x-amz-date",
    signature: "c9d5ea9f3f72853aea855b47ea873832890dbdd183b4468f858259531a5138ea",
  },
  {
    name: "get-header-value-multiline",
    method: "GET",
    path: "/",
    headers: H([["My-Header1", "value1,value2,value3"]]),
    signed: "host;my-header1;x-amz-date",
    signature: "ba17b383a53190154eb5fa66a1b836cc297cc0a3d70a5d00705980573d8ff790",
  },
  {
    name: "get-header-value-order",
    method: "GET",
    path: "/",
    headers: H([
      ["My-Header1", "value4"],
      ["My-Header1", "value1"],
      ["My-Header1", "value3"],
      ["My-Header1", "value2"],
    ]),
    signed: "host;my-header1;x-amz-date",
    signature: "08c7e5a9acfcfeb3ab6b2185e75ce8b1deb5e634ec47601a50643f830c755c01",
  },
  {
    name: "get-header-value-trim",
    method: "GET",
    path: "/",
    headers: H([
      ["My-Header1", " value1 "],
      ["My-Header2", ' "a   b   c" '],
    ]),
    signed: "host;my-header1;my-header2;x-amz-date",
    signature: "acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
  },
  {
    name: "get-unreserved",
    method: "GET",
    path: "/-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
    headers: H(),
    signed: "host;x-amz-date",
    signature: "07ef7494c76fa4850883e2b006601f940f8a34d404d0cfa977f52a65bbf5f24f",
  },
  {
    name: "get-utf8 (raw request line)",
    method: "GET",
    path: "/ሴ",
    headers: H(),
    signed: "host;x-amz-date",
    signature: "8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85",
  },
  {
    name: "get-vanilla-empty-query-key",
    method: "GET",
    path: "/",
    query: [["Param1", "value1"]],
    headers: H(),
    signed: "host;x-amz-date",
    signature: "a67d582fa61cc504c4bae71f336f98b97f1ea3c7a6bfe1b6e45aec72011b9aeb",
  },
  {
    name: "get-vanilla-query-order-key-case",
    method: "GET",
    path: "/",
    query: [
      ["Param2", "value2"],
      ["Param1", "value1"],
    ],
    headers: H(),
    signed: "host;x-amz-date",
    signature: "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
  },
  {
    name: "get-vanilla-query-unreserved",
    method: "GET",
    path: "/",
    query: [
      [
        "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
        "-._~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz",
      ],
    ],
    headers: H(),
    signed: "host;x-amz-date",
    signature: "9c3e54bfcdf0b19771a7f523ee5669cdf59bc7cc0884027167c21bb143a40197",
  },
  {
    name: "get-vanilla-utf8-query",
    method: "GET",
    path: "/",
    query: [["ሴ", "bar"]],
    headers: H(),
    signed: "host;x-amz-date",
    signature: "2cdec8eed098649ff3a119c94853b13c643bcf08f8b0a1d91e12c9027818dd04",
  },
  {
    name: "post-header-key-case",
    method: "POST",
    path: "/",
    headers: H(),
    signed: "host;x-amz-date",
    signature: "5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
  },
  {
    name: "post-header-key-sort",
    method: "POST",
    path: "/",
    headers: H([["My-Header1", "value1"]]),
    signed: "host;my-header1;x-amz-date",
    signature: "c5410059b04c1ee005303aed430f6e6645f61f4dc9e1461ec8f8916fdf18852c",
  },
  {
    name: "post-header-value-case",
    method: "POST",
    path: "/",
    headers: H([["My-Header1", "VALUE1"]]),
    signed: "host;my-header1;x-amz-date",
    signature: "cdbc9802e29d2942e5e10b5bccfdd67c5f22c7c4e8ae67b53629efa58b974b7d",
  },
  {
    name: "post-vanilla-query",
    method: "POST",
    path: "/",
    query: [["Param1", "value1"]],
    headers: H(),
    signed: "host;x-amz-date",
    signature: "28038455d6de14eafc1f9222cf5aa6f1a96197d7deb8263271d420d138af7f11",
  },
  {
    name: "post-vanilla-query-nonunreserved",
    method: "POST",
    path: "/",
    query: [
      ["@#$%^", ""],
      ["+", '/,?><`";:\\|][{}'],
    ],
    headers: H(),
    signed: "host;x-amz-date",
    signature: "66c82657c86e26fb25238d0e69f011edc4c6df5ae71119d7cb98ed9b87393c1e",
  },
  {
    name: "post-vanilla-query-space",
    method: "POST",
    path: "/",
    query: [["p", ""]],
    headers: H(),
    signed: "host;x-amz-date",
    signature: "e71688addb58a26418614085fb730ba3faa623b461c17f48f2fbdb9361b94a9b",
  },
  {
    name: "post-x-www-form-urlencoded (body hashed by the proxy)",
    method: "POST",
    path: "/",
    headers: [["Content-Type", "application/x-www-form-urlencoded"], ...H()],
    signed: "content-type;host;x-amz-date",
    signature: "ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
    body: "Param1=value1",
  },
  {
    name: "post-x-www-form-urlencoded-parameters",
    method: "POST",
    path: "/",
    headers: [["Content-Type", "application/x-www-form-urlencoded; charset=utf8"], ...H()],
    signed: "content-type;host;x-amz-date",
    signature: "1a72ec8f64bd914b0e42e42607c7fbce7fb2c7465f63e3092b3b0d39fa77a6fe",
    body: "Param1=value1",
  },
];

function clientAuth(signed: string, service = "service", date = "20150830", region = "us-east-1"): string {
  return `AWS4-HMAC-SHA256 Credential=${AWS_PLACEHOLDER_ACCESS_KEY_ID}/${date}/${region}/${service}/aws4_request, SignedHeaders=${signed}, Signature=${JUNK}`;
}

for (const v of VECTORS) {
  test(`SigV4 suite: ${v.name}`, async () => {
    const target = v.path + (v.query ? `?${v.query.map(([k, val]) => `${enc(k)}=${enc(val)}`).join("&")}` : "");
    const engine = createAwsSigningEngine({ credentials: SUITE_CREDS });
    const out = await engine.handle({
      method: v.method,
      host: "example.amazonaws.com",
      target,
      headers: [...v.headers, ["Authorization", clientAuth(v.signed)]],
      body: v.body === undefined ? null : Readable.from([Buffer.from(v.body)]),
    });
    assert.equal(out.action, "signed");
    if (out.action !== "signed") return;
    const auth = out.headers.filter(([n]) => n.toLowerCase() === "authorization");
    assert.equal(auth.length, 1);
    assert.equal(
      auth[0][1],
      `AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, SignedHeaders=${v.signed}, Signature=${v.signature}`,
    );
    if (v.body !== undefined) {
      const parts: Buffer[] = [];
      for await (const c of out.body!) parts.push(c as Buffer);
      assert.equal(Buffer.concat(parts).toString(), v.body, "the buffered body is forwarded unchanged");
    }
  });
}

test("SigV4 suite: post-sts-header-before (a session token the client signed is kept by the signer)", async () => {
  const token =
    "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==";
  const headers: HeaderPairs = [
    ...H([["X-Amz-Security-Token", token]]),
    ["Authorization", clientAuth("host;x-amz-date;x-amz-security-token")],
  ];
  const auth = parseSigV4(headers, "/");
  assert.equal(auth.kind, "sigv4");
  if (auth.kind !== "sigv4") return;
  const out = await resignSigV4({
    method: "POST",
    target: "/",
    headers,
    auth,
    credentials: SUITE_CREDS,
    payloadHash: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
  });
  assert.match(out.authorization, /Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead$/);
});

test("path normalisation of the suite (get-slashes, get-relative, get-space) for non-S3 services, wire path kept for S3", async () => {
  // Same signature whether the client wrote the path normalised or not: the canonical URI is normalised.
  const sign = async (target: string, service: string) => {
    const headers: HeaderPairs = [...H(), ["Authorization", clientAuth("host;x-amz-date", service)]];
    const auth = parseSigV4(headers, target);
    assert.equal(auth.kind, "sigv4");
    if (auth.kind !== "sigv4") throw new Error("unreachable");
    return (
      await resignSigV4({
        method: "GET",
        target,
        headers,
        auth,
        credentials: SUITE_CREDS,
        payloadHash: "UNSIGNED-PAYLOAD",
      })
    ).signature;
  };
  assert.equal(await sign("//example//", "service"), await sign("/example/", "service"));
  assert.equal(await sign("/example/..", "service"), await sign("/", "service"));
  assert.equal(await sign("/./example", "service"), await sign("/example", "service"));
  // get-space: the wire form %20 is encoded a second time for non-S3 services …
  assert.notEqual(await sign("/example%20space/", "service"), await sign("/example space/", "service"));
  // … while S3 signs the wire path as is: no normalisation at all.
  assert.notEqual(await sign("//example//", "s3"), await sign("/example/", "s3"));
});

test("S3 streaming docs example: seed and every chunk signature re-computed with the real keys", async () => {
  const engine = createAwsSigningEngine({
    credentials: { accessKeyId: "AKIAIOSFODNN7EXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" },
  });
  const a = Buffer.alloc(65536 + 1024, "a");
  const body = Buffer.concat([
    Buffer.from(`10000;chunk-signature=${JUNK}\r\n`),
    a.subarray(0, 65536),
    Buffer.from(`\r\n400;chunk-signature=${JUNK}\r\n`),
    a.subarray(65536),
    Buffer.from(`\r\n0;chunk-signature=${JUNK}\r\n\r\n`),
  ]);
  const signed =
    "content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class";
  // Feed the body in awkward 7-byte pieces: the parser must not depend on read boundaries.
  const pieces: Buffer[] = [];
  for (let i = 0; i < body.length; i += 7) pieces.push(body.subarray(i, i + 7));
  const out = await engine.handle({
    method: "PUT",
    host: "s3.amazonaws.com",
    target: "/examplebucket/chunkObject.txt",
    body: Readable.from(pieces),
    headers: [
      ["Host", "s3.amazonaws.com"],
      ["x-amz-date", "20130524T000000Z"],
      ["x-amz-storage-class", "REDUCED_REDUNDANCY"],
      ["Authorization", clientAuth(signed, "s3", "20130524")],
      ["x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"],
      ["Content-Encoding", "aws-chunked"],
      ["x-amz-decoded-content-length", "66560"],
      ["Content-Length", String(body.length)],
    ],
  });
  assert.equal(out.action, "signed");
  if (out.action !== "signed") return;
  assert.match(
    out.headers.find(([n]) => n === "Authorization")![1],
    /Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9$/,
  );
  const parts: Buffer[] = [];
  for await (const c of out.body!) parts.push(c as Buffer);
  const resigned = Buffer.concat(parts);
  assert.equal(resigned.length, body.length, "byte length unchanged");
  assert.deepEqual(
    [...resigned.toString("latin1").matchAll(/chunk-signature=([0-9a-f]{64})/g)].map((m) => m[1]),
    [
      "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
      "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
      "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
    ],
  );
});
