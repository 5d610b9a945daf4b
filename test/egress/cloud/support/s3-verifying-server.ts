/**
 * A small S3 stand-in that checks every request's SigV4 signature with its own, independent
 * implementation of the published algorithm (not the proxy's code, not smithy): canonical
 * request from the wire (raw path for S3, decoded-then-RFC-3986-re-encoded sorted query, trimmed
 * and joined signed headers), payload hash checked against the body, every aws-chunked chunk
 * signature and the trailer signature checked along the chain, flexible-checksum trailers
 * recomputed. Configured with the "real" keys: anything signed otherwise gets 403.
 * Enough of S3 for the SDK: CreateBucket, Put/Get/Head/DeleteObject, ListObjectsV2, multipart.
 */
import crypto from "node:crypto";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Crc } from "./checksums.ts";

export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export interface S3RequestRecord {
  method: string;
  target: string;
  payloadMode: string;
  chunks: number;
  verifiedChecksum: string | null;
  status: number;
  error?: string;
}

export interface VerifyingS3 {
  port: number;
  objects: Map<string, Buffer>;
  requests: S3RequestRecord[];
  /** When false, object bodies are verified and counted but not kept (large benchmarks). */
  store: boolean;
  /** Answer every request with `Connection: close` (as some S3-compatible servers do). */
  closeConnections: boolean;
  close(): Promise<void>;
}

const EMPTY = sha256Hex("");

function sha256Hex(data: string | Buffer): string {
  return crypto.createHash("sha256").update(data).digest("hex");
}
function hmac(key: Buffer | string, data: string): Buffer {
  return crypto.createHmac("sha256", key).update(data, "utf8").digest();
}
function rfc3986(s: string): string {
  return encodeURIComponent(s).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
}

class S3Error extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/** Pull-based reader over the request stream (independent of the proxy's push parser). */
class BodyReader {
  private buf: Buffer = Buffer.alloc(0);
  private ended = false;
  private readonly it: AsyncIterator<Buffer>;
  total = 0;
  constructor(stream: AsyncIterable<Buffer>) {
    this.it = stream[Symbol.asyncIterator]();
  }
  private async more(): Promise<boolean> {
    if (this.ended) return false;
    const { done, value } = await this.it.next();
    if (done) {
      this.ended = true;
      return false;
    }
    this.total += value.length;
    this.buf = this.buf.length ? Buffer.concat([this.buf, value]) : value;
    return true;
  }
  async line(): Promise<string> {
    for (;;) {
      const i = this.buf.indexOf("\r\n");
      if (i !== -1) {
        const s = this.buf.subarray(0, i).toString("latin1");
        this.buf = this.buf.subarray(i + 2);
        return s;
      }
      if (!(await this.more())) throw new S3Error(400, "IncompleteBody", "body ended inside a line");
    }
  }
  async exact(n: number): Promise<Buffer> {
    while (this.buf.length < n)
      if (!(await this.more())) throw new S3Error(400, "IncompleteBody", "body ended inside a chunk");
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }
  async rest(onData: (b: Buffer) => void): Promise<void> {
    if (this.buf.length) onData(this.buf);
    this.buf = Buffer.alloc(0);
    while (await this.more()) {
      onData(this.buf);
      this.buf = Buffer.alloc(0);
    }
  }
  async atEnd(): Promise<boolean> {
    return this.buf.length === 0 && !(await this.more()) && this.buf.length === 0;
  }
}

interface Verified {
  signingKey: Buffer;
  amzDate: string;
  scope: string;
  signature: string;
  payloadHash: string;
}

function verifyHeaderSignature(req: http.IncomingMessage, creds: S3Credentials): Verified {
  const auth = req.headers.authorization ?? "";
  const m = /^AWS4-HMAC-SHA256 Credential=([^,\s]+),\s*SignedHeaders=([^,\s]+),\s*Signature=([0-9a-f]{64})$/.exec(auth);
  if (!m) throw new S3Error(403, "AccessDenied", "missing or malformed SigV4 Authorization");
  const [akid, date, region, service, term] = m[1].split("/");
  if (akid !== creds.accessKeyId)
    throw new S3Error(403, "InvalidAccessKeyId", "The AWS Access Key Id you provided does not exist in our records.");
  if (term !== "aws4_request" || service !== "s3") throw new S3Error(403, "AccessDenied", "bad credential scope");
  const amzDate = String(req.headers["x-amz-date"] ?? "");
  if (amzDate.slice(0, 8) !== date) throw new S3Error(403, "AccessDenied", "x-amz-date does not match the scope");
  const signed = m[2].split(";");
  const raw: Array<[string, string]> = [];
  for (let i = 0; i < req.rawHeaders.length; i += 2) raw.push([req.rawHeaders[i].toLowerCase(), req.rawHeaders[i + 1]]);
  const canonHeaders = signed.map((name) => {
    const values = raw.filter(([n]) => n === name).map(([, v]) => v.trim().replace(/\s+/g, " "));
    if (values.length === 0) throw new S3Error(403, "AccessDenied", `signed header ${name} missing`);
    return `${name}:${values.join(",")}\n`;
  });
  const unsignedAmz = raw.filter(([n]) => n.startsWith("x-amz-") && !signed.includes(n));
  if (unsignedAmz.length)
    throw new S3Error(403, "AccessDenied", "There were headers present in the request which were not signed");
  const url = req.url ?? "/";
  const q = url.indexOf("?");
  const path = q === -1 ? url : url.slice(0, q);
  const pairs = (q === -1 ? "" : url.slice(q + 1))
    .split("&")
    .filter(Boolean)
    .map((p) => {
      const eq = p.indexOf("=");
      const k = decodeURIComponent(eq === -1 ? p : p.slice(0, eq));
      const v = eq === -1 ? "" : decodeURIComponent(p.slice(eq + 1));
      return [rfc3986(k), rfc3986(v)] as const;
    })
    .sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  const payloadHash = String(req.headers["x-amz-content-sha256"] ?? "");
  if (!payloadHash) throw new S3Error(400, "InvalidRequest", "x-amz-content-sha256 is required");
  const canonical = [
    req.method,
    path,
    pairs.map(([k, v]) => `${k}=${v}`).join("&"),
    canonHeaders.join(""),
    signed.join(";"),
    payloadHash,
  ].join("\n");
  const scope = `${date}/${region}/${service}/aws4_request`;
  const stringToSign = ["AWS4-HMAC-SHA256", amzDate, scope, sha256Hex(canonical)].join("\n");
  const signingKey = hmac(hmac(hmac(hmac(`AWS4${creds.secretAccessKey}`, date), region), service), "aws4_request");
  const expected = hmac(signingKey, stringToSign).toString("hex");
  if (!crypto.timingSafeEqual(Buffer.from(expected), Buffer.from(m[3])))
    throw new S3Error(
      403,
      "SignatureDoesNotMatch",
      "The request signature we calculated does not match the signature you provided.",
    );
  return { signingKey, amzDate, scope, signature: m[3], payloadHash };
}

/** Reads and verifies the body according to the payload mode; returns the decoded object bytes. */
async function readVerifiedBody(
  req: http.IncomingMessage,
  v: Verified,
  keep: boolean,
  rec: S3RequestRecord,
): Promise<Buffer> {
  const reader = new BodyReader(req as AsyncIterable<Buffer>);
  const parts: Buffer[] = [];
  let decoded = 0;
  const trailerName = String(req.headers["x-amz-trailer"] ?? "").toLowerCase();
  const crcKind =
    trailerName === "x-amz-checksum-crc32" ? "crc32" : trailerName === "x-amz-checksum-crc32c" ? "crc32c" : null;
  const headerCrcName = ["crc32", "crc32c"].find((k) => req.headers[`x-amz-checksum-${k}`]) as
    "crc32" | "crc32c" | undefined;
  const crc = new Crc((crcKind ?? headerCrcName ?? "crc32") as "crc32" | "crc32c");
  const take = (b: Buffer) => {
    decoded += b.length;
    crc.update(b);
    if (keep) parts.push(Buffer.from(b));
  };
  const mode = v.payloadHash;
  rec.payloadMode = /^[0-9a-f]{64}$/.test(mode) ? "literal-hash" : mode;
  if (/^[0-9a-f]{64}$/.test(mode) || mode === "UNSIGNED-PAYLOAD") {
    const h = crypto.createHash("sha256");
    await reader.rest((b) => {
      h.update(b);
      take(b);
    });
    if (mode !== "UNSIGNED-PAYLOAD" && h.digest("hex") !== mode)
      throw new S3Error(
        400,
        "XAmzContentSHA256Mismatch",
        "The provided 'x-amz-content-sha256' header does not match what was computed.",
      );
  } else if (mode.startsWith("STREAMING-")) {
    const signedChunks =
      mode === "STREAMING-AWS4-HMAC-SHA256-PAYLOAD" || mode === "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER";
    if (!signedChunks && mode !== "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
      throw new S3Error(400, "InvalidArgument", `unsupported ${mode}`);
    let previous = v.signature;
    for (;;) {
      const header = await reader.line();
      const m = signedChunks
        ? /^([0-9a-fA-F]+);chunk-signature=([0-9a-f]{64})$/.exec(header)
        : /^([0-9a-fA-F]+)$/.exec(header);
      if (!m)
        throw new S3Error(400, "InvalidChunkSizeError", `bad chunk header ${JSON.stringify(header.slice(0, 80))}`);
      const size = parseInt(m[1], 16);
      const data = size > 0 ? await reader.exact(size) : Buffer.alloc(0);
      if (signedChunks) {
        const expected = hmac(
          v.signingKey,
          ["AWS4-HMAC-SHA256-PAYLOAD", v.amzDate, v.scope, previous, EMPTY, sha256Hex(data)].join("\n"),
        ).toString("hex");
        if (expected !== m[2])
          throw new S3Error(403, "SignatureDoesNotMatch", `chunk ${rec.chunks} signature does not match`);
        previous = expected;
      }
      rec.chunks++;
      if (size === 0) break;
      take(data);
      if ((await reader.line()) !== "") throw new S3Error(400, "IncompleteBody", "chunk not followed by CRLF");
    }
    // Trailers (or the final empty line).
    const trailers = new Map<string, string>();
    let canonicalTrailers = "";
    let trailerSignature: string | null = null;
    for (;;) {
      const line = await reader.line();
      if (line === "") break;
      const colon = line.indexOf(":");
      const name = line.slice(0, colon).trim().toLowerCase();
      const value = line.slice(colon + 1).trim();
      if (name === "x-amz-trailer-signature") trailerSignature = value;
      else {
        trailers.set(name, value);
        canonicalTrailers += `${name}:${value}\n`;
      }
    }
    if (mode === "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER") {
      const expected = hmac(
        v.signingKey,
        ["AWS4-HMAC-SHA256-TRAILER", v.amzDate, v.scope, previous, sha256Hex(canonicalTrailers)].join("\n"),
      ).toString("hex");
      if (trailerSignature !== expected)
        throw new S3Error(403, "SignatureDoesNotMatch", "trailer signature does not match");
    }
    if (crcKind) {
      const got = trailers.get(trailerName);
      if (got !== crc.base64()) throw new S3Error(400, "BadDigest", `trailer ${trailerName} does not match the data`);
      rec.verifiedChecksum = trailerName;
    }
    if (!(await reader.atEnd())) throw new S3Error(400, "IncompleteBody", "bytes after the aws-chunked body");
    const declared = req.headers["x-amz-decoded-content-length"];
    if (declared !== undefined && Number(declared) !== decoded)
      throw new S3Error(400, "IncompleteBody", "x-amz-decoded-content-length does not match");
  } else throw new S3Error(400, "InvalidArgument", "unknown x-amz-content-sha256");
  if (headerCrcName && !mode.startsWith("STREAMING-")) {
    if (req.headers[`x-amz-checksum-${headerCrcName}`] !== crc.base64())
      throw new S3Error(400, "BadDigest", "checksum header does not match");
    rec.verifiedChecksum = `x-amz-checksum-${headerCrcName}`;
  }
  return keep ? Buffer.concat(parts) : Buffer.alloc(0);
}

const xmlEsc = (s: string) =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

export async function startVerifyingS3(creds: S3Credentials): Promise<VerifyingS3> {
  const objects = new Map<string, Buffer>();
  const uploads = new Map<string, Map<number, Buffer>>();
  const requests: S3RequestRecord[] = [];
  const state: VerifyingS3 = {
    port: 0,
    objects,
    requests,
    store: true,
    closeConnections: false,
    close: async () => {},
  };
  const server = http.createServer(async (req, res) => {
    const rec: S3RequestRecord = {
      method: req.method ?? "",
      target: req.url ?? "",
      payloadMode: "",
      chunks: 0,
      verifiedChecksum: null,
      status: 200,
    };
    requests.push(rec);
    const send = (status: number, body: string | Buffer = "", headers: Record<string, string> = {}) => {
      rec.status = status;
      res.writeHead(status, {
        "content-length": String(Buffer.byteLength(body)),
        ...(state.closeConnections ? { connection: "close" } : {}),
        ...headers,
      });
      res.end(req.method === "HEAD" ? undefined : body);
    };
    try {
      const v = verifyHeaderSignature(req, creds);
      const hostName = String(req.headers.host ?? "").replace(/:\d+$/, "");
      const url = new URL(req.url ?? "/", "http://x");
      const rawPath = (req.url ?? "/").split("?")[0];
      const vh = /^(.+)\.s3[.-]/.exec(hostName);
      let bucket: string;
      let rawKey: string;
      if (vh) {
        bucket = vh[1];
        rawKey = rawPath.slice(1);
      } else {
        const [, b = "", ...rest] = rawPath.split("/");
        bucket = b;
        rawKey = rest.join("/");
      }
      const key = rawKey.split("/").map(decodeURIComponent).join("/");
      const id = `${bucket}/${key}`;
      const body = await readVerifiedBody(req, v, state.store, rec);
      const q = url.searchParams;
      if (req.method === "PUT" && key === "") return send(200, "", { location: `/${bucket}` });
      if (req.method === "PUT" && q.has("uploadId")) {
        const parts = uploads.get(q.get("uploadId")!);
        if (!parts) throw new S3Error(404, "NoSuchUpload", "no such upload");
        parts.set(Number(q.get("partNumber")), body);
        return send(200, "", { etag: `"${sha256Hex(body).slice(0, 32)}"` });
      }
      if (req.method === "PUT") {
        objects.set(id, body);
        return send(200, "", { etag: `"${sha256Hex(body).slice(0, 32)}"` });
      }
      if (req.method === "POST" && q.has("uploads")) {
        const uploadId = crypto.randomUUID();
        uploads.set(uploadId, new Map());
        return send(
          200,
          `<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult><Bucket>${xmlEsc(bucket)}</Bucket><Key>${xmlEsc(key)}</Key><UploadId>${uploadId}</UploadId></InitiateMultipartUploadResult>`,
          { "content-type": "application/xml" },
        );
      }
      if (req.method === "POST" && q.has("uploadId")) {
        const parts = uploads.get(q.get("uploadId")!);
        if (!parts) throw new S3Error(404, "NoSuchUpload", "no such upload");
        const numbers = [...body.toString().matchAll(/<PartNumber>(\d+)<\/PartNumber>/g)].map((m) => Number(m[1]));
        objects.set(id, Buffer.concat(numbers.map((n) => parts.get(n) ?? Buffer.alloc(0))));
        uploads.delete(q.get("uploadId")!);
        return send(
          200,
          `<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult><Bucket>${xmlEsc(bucket)}</Bucket><Key>${xmlEsc(key)}</Key><ETag>"done"</ETag></CompleteMultipartUploadResult>`,
          { "content-type": "application/xml" },
        );
      }
      if ((req.method === "GET" || req.method === "HEAD") && key === "" && q.get("list-type") === "2") {
        const prefix = q.get("prefix") ?? "";
        const encodeKeys = q.get("encoding-type") === "url";
        const keys = [...objects.keys()]
          .filter((k) => k.startsWith(`${bucket}/${prefix}`))
          .map((k) => k.slice(bucket.length + 1))
          .sort();
        const contents = keys
          .map(
            (k) =>
              `<Contents><Key>${xmlEsc(encodeKeys ? rfc3986(k).replace(/%2F/g, "/") : k)}</Key><LastModified>2024-01-01T00:00:00.000Z</LastModified><ETag>"x"</ETag><Size>${objects.get(`${bucket}/${k}`)!.length}</Size><StorageClass>STANDARD</StorageClass></Contents>`,
          )
          .join("");
        return send(
          200,
          `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>${xmlEsc(bucket)}</Name><Prefix>${xmlEsc(prefix)}</Prefix><KeyCount>${keys.length}</KeyCount><MaxKeys>1000</MaxKeys>${encodeKeys ? "<EncodingType>url</EncodingType>" : ""}<IsTruncated>false</IsTruncated>${contents}</ListBucketResult>`,
          { "content-type": "application/xml" },
        );
      }
      if (req.method === "GET" || req.method === "HEAD") {
        const obj = objects.get(id);
        if (!obj) throw new S3Error(404, "NoSuchKey", "The specified key does not exist.");
        return send(200, obj, {
          etag: `"${sha256Hex(obj).slice(0, 32)}"`,
          "last-modified": new Date(0).toUTCString(),
          "content-type": "application/octet-stream",
        });
      }
      if (req.method === "DELETE") {
        objects.delete(id);
        return send(204);
      }
      throw new S3Error(405, "MethodNotAllowed", "not supported by the test server");
    } catch (err) {
      const e =
        err instanceof S3Error ? err : new S3Error(500, "InternalError", String((err as Error)?.message ?? err));
      rec.error = `${e.code}: ${e.message}`;
      req.resume();
      if (res.headersSent) return res.destroy();
      send(
        e.status,
        `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${e.code}</Code><Message>${xmlEsc(e.message)}</Message></Error>`,
        { "content-type": "application/xml", connection: "close" },
      );
    }
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  state.port = (server.address() as AddressInfo).port;
  state.close = () =>
    new Promise<void>((r) => {
      server.closeAllConnections();
      server.close(() => r());
    });
  return state;
}
