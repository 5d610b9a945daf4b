/**
 * Frames between the agent server and its Python worker (see `python/wharf_worker/frames.py`):
 * `u32 header length | header JSON | u32 body length | body`, big-endian. The body is JSON the worker
 * serialised with Python's own rules; it is forwarded to clients as bytes, parsed only when needed.
 */

export const MAX_FRAME = 256 * 1024 * 1024;

export interface Frame {
  header: Record<string, unknown>;
  body: Buffer;
}

export function encodeFrame(header: Record<string, unknown>, body: Buffer | string = ""): Buffer {
  // Strings are written straight into the one frame buffer (no intermediate Buffers to copy from):
  // a frame per request and per reply, so this is on every round trip.
  const h = JSON.stringify(header);
  const hlen = Buffer.byteLength(h);
  const blen = typeof body === "string" ? Buffer.byteLength(body) : body.length;
  const out = Buffer.allocUnsafe(8 + hlen + blen);
  out.writeUInt32BE(hlen, 0);
  out.write(h, 4);
  out.writeUInt32BE(blen, 4 + hlen);
  if (typeof body === "string") out.write(body, 8 + hlen);
  else body.copy(out, 8 + hlen);
  return out;
}

export class FrameError extends Error {}

/** Splits a byte stream into frames; chunks may cut frames anywhere. */
export class FrameDecoder {
  private chunks: Buffer[] = [];
  private size = 0;

  push(chunk: Buffer): Frame[] {
    this.chunks.push(chunk);
    this.size += chunk.length;
    const out: Frame[] = [];
    let buf = this.chunks.length === 1 ? this.chunks[0] : Buffer.concat(this.chunks, this.size);
    let pos = 0;
    while (buf.length - pos >= 4) {
      const hlen = buf.readUInt32BE(pos);
      if (hlen > MAX_FRAME) throw new FrameError(`frame header of ${hlen} bytes`);
      if (buf.length - pos < 8 + hlen) break;
      const blen = buf.readUInt32BE(pos + 4 + hlen);
      if (blen > MAX_FRAME) throw new FrameError(`frame body of ${blen} bytes`);
      const end = pos + 8 + hlen + blen;
      if (buf.length < end) break;
      let header: Record<string, unknown>;
      try {
        header = JSON.parse(buf.subarray(pos + 4, pos + 4 + hlen).toString("utf8")) as Record<string, unknown>;
      } catch (err) {
        throw new FrameError("a frame header is not JSON", { cause: err });
      }
      // A copy: the body outlives the buffer the next chunk is concatenated into.
      out.push({ header, body: Buffer.from(buf.subarray(pos + 8 + hlen, end)) });
      pos = end;
    }
    buf = buf.subarray(pos);
    this.chunks = buf.length ? [buf] : [];
    this.size = buf.length;
    return out;
  }
}
