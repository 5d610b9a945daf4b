import crypto from "node:crypto";
import { Transform, type TransformCallback } from "node:stream";
import { AwsRefusal } from "./aws-refusal.ts";

/**
 * Re-signs an `aws-chunked` body of `STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]` while it streams:
 *
 *   <hex-size>;chunk-signature=<64 hex>\r\n<data>\r\n … 0;chunk-signature=<sig>\r\n[trailers]\r\n
 *
 * Every chunk signature is HMAC(signingKey, "AWS4-HMAC-SHA256-PAYLOAD\n" + date + "\n" + scope + "\n"
 * + previous signature + "\n" + sha256("") + "\n" + sha256(data)), the chain seeded with the
 * re-signed header signature; the trailer's `x-amz-trailer-signature` is HMAC over
 * "AWS4-HMAC-SHA256-TRAILER\n" + date + "\n" + scope + "\n" + final chunk signature + "\n" +
 * sha256("name:value\n" per trailer). Signatures are always 64 hex digits, so every byte count
 * (chunk sizes, Content-Length, x-amz-decoded-content-length) stays exactly as the client sent it.
 *
 * A chunk's signature precedes its data, so one chunk is held at a time: memory is bounded by the
 * largest chunk (`maxChunkBytes`; SDKs use 64 KiB–1 MiB), never by the body.
 */
export interface ChunkResignOptions {
  signingKey: Uint8Array;
  longDate: string;
  scope: string;
  seedSignature: string;
  maxChunkBytes?: number;
  /** Called once when the stream fails, with the refusal (for the audit log). */
  onError?: (refusal: AwsRefusal, chunks: number) => void;
}

const EMPTY_SHA256 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
const MAX_LINE = 4096;
const MAX_TRAILER_BYTES = 16 * 1024;
export const DEFAULT_MAX_CHUNK_BYTES = 16 * 1024 * 1024;

type State = "header" | "data" | "data-crlf" | "trailer" | "done";

export class AwsChunkedResigner extends Transform {
  private state: State = "header";
  private pending: Buffer = Buffer.alloc(0);
  private chunkParts: Buffer[] = [];
  private chunkHash = crypto.createHash("sha256");
  private remaining = 0;
  private sizeText = "";
  private previous: string;
  private trailerCanonical = "";
  private trailerBytes = 0;
  private chunks = 0;
  private readonly key: Buffer;
  private readonly prefix: string;
  private readonly maxChunk: number;
  private failed = false;

  constructor(private readonly options: ChunkResignOptions) {
    super();
    this.key = Buffer.from(options.signingKey);
    this.previous = options.seedSignature;
    this.prefix = `${options.longDate}\n${options.scope}\n`;
    this.maxChunk = options.maxChunkBytes ?? DEFAULT_MAX_CHUNK_BYTES;
  }

  /** How many chunks (including the final empty one) were re-signed so far. */
  get chunkCount(): number {
    return this.chunks;
  }

  override _transform(data: Buffer, _enc: BufferEncoding, done: TransformCallback): void {
    try {
      this.consume(data);
      done();
    } catch (err) {
      done(this.fail(err));
    }
  }

  override _flush(done: TransformCallback): void {
    if (this.state !== "done" || this.pending.length > 0) {
      done(this.fail(new AwsRefusal("malformed_chunk", "the aws-chunked body ended before its final chunk")));
      return;
    }
    done();
  }

  private fail(err: unknown): Error {
    const refusal =
      err instanceof AwsRefusal ? err : new AwsRefusal("malformed_chunk", String((err as Error)?.message ?? err));
    if (!this.failed) {
      this.failed = true;
      this.options.onError?.(refusal, this.chunks);
    }
    return refusal;
  }

  private consume(data: Buffer): void {
    let buf = this.pending.length > 0 ? Buffer.concat([this.pending, data]) : data;
    this.pending = Buffer.alloc(0);
    while (buf.length > 0) {
      if (this.state === "data") {
        const take = Math.min(this.remaining, buf.length);
        const part = buf.subarray(0, take);
        this.chunkParts.push(part);
        this.chunkHash.update(part);
        this.remaining -= take;
        buf = buf.subarray(take);
        if (this.remaining === 0) this.state = "data-crlf";
        continue;
      }
      if (this.state === "data-crlf") {
        if (buf.length < 2) break;
        if (buf[0] !== 0x0d || buf[1] !== 0x0a)
          throw new AwsRefusal("malformed_chunk", "chunk data is not followed by CRLF");
        buf = buf.subarray(2);
        this.emitChunk();
        this.state = "header";
        continue;
      }
      if (this.state === "done") throw new AwsRefusal("malformed_chunk", "bytes after the end of the aws-chunked body");
      // header or trailer: line-oriented
      const nl = buf.indexOf(0x0a);
      if (nl === -1) {
        if (buf.length > MAX_LINE) throw new AwsRefusal("malformed_chunk", "aws-chunked line too long");
        break;
      }
      const lineEnd = nl > 0 && buf[nl - 1] === 0x0d ? nl - 1 : nl;
      const line = buf.subarray(0, lineEnd).toString("latin1");
      const terminator = buf.subarray(lineEnd, nl + 1).toString("latin1");
      buf = buf.subarray(nl + 1);
      if (this.state === "header") this.onHeaderLine(line, terminator);
      else this.onTrailerLine(line, terminator);
    }
    if (buf.length > 0) this.pending = Buffer.from(buf);
  }

  private onHeaderLine(line: string, terminator: string): void {
    if (terminator !== "\r\n") throw new AwsRefusal("malformed_chunk", "chunk header must end with CRLF");
    const m = /^([0-9a-fA-F]{1,16});chunk-signature=([0-9a-f]{64})$/.exec(line);
    if (!m) throw new AwsRefusal("malformed_chunk", "chunk header must be <hex-size>;chunk-signature=<signature>");
    const size = Number.parseInt(m[1], 16);
    if (!Number.isSafeInteger(size)) throw new AwsRefusal("malformed_chunk", "chunk size out of range");
    if (size > this.maxChunk)
      throw new AwsRefusal(
        "chunk_too_large",
        `an aws-chunked chunk of ${size} bytes exceeds the proxy's limit of ${this.maxChunk} bytes`,
      );
    this.sizeText = m[1];
    if (size === 0) {
      const signature = this.sign(EMPTY_SHA256);
      this.push(`${this.sizeText};chunk-signature=${signature}\r\n`, "latin1");
      this.chunks++;
      this.state = "trailer";
      return;
    }
    this.remaining = size;
    this.chunkParts = [];
    this.chunkHash = crypto.createHash("sha256");
    this.state = "data";
  }

  private emitChunk(): void {
    const signature = this.sign(this.chunkHash.digest("hex"));
    this.push(`${this.sizeText};chunk-signature=${signature}\r\n`, "latin1");
    for (const part of this.chunkParts) this.push(part);
    this.push("\r\n", "latin1");
    this.chunkParts = [];
    this.chunks++;
  }

  private onTrailerLine(line: string, terminator: string): void {
    this.trailerBytes += line.length + terminator.length;
    if (this.trailerBytes > MAX_TRAILER_BYTES) throw new AwsRefusal("malformed_chunk", "aws-chunked trailer too large");
    if (line === "") {
      this.push(terminator, "latin1");
      this.state = "done";
      return;
    }
    const colon = line.indexOf(":");
    if (colon <= 0) throw new AwsRefusal("malformed_chunk", "trailer line must be name:value");
    const name = line.slice(0, colon).trim().toLowerCase();
    const value = line.slice(colon + 1).trim();
    if (name === "x-amz-trailer-signature") {
      const hash = crypto.createHash("sha256").update(this.trailerCanonical, "latin1").digest("hex");
      const hmac = crypto
        .createHmac("sha256", this.key)
        .update(`AWS4-HMAC-SHA256-TRAILER\n${this.prefix}${this.previous}\n${hash}`, "latin1");
      this.push(`${line.slice(0, colon)}:${hmac.digest("hex")}${terminator}`, "latin1");
      return;
    }
    this.trailerCanonical += `${name}:${value}\n`;
    this.push(`${line}${terminator}`, "latin1");
  }

  private sign(dataHash: string): string {
    const signature = crypto
      .createHmac("sha256", this.key)
      .update(`AWS4-HMAC-SHA256-PAYLOAD\n${this.prefix}${this.previous}\n${EMPTY_SHA256}\n${dataHash}`, "latin1")
      .digest("hex");
    this.previous = signature;
    return signature;
  }
}
