import fs from "node:fs";
import path from "node:path";
import { StringDecoder } from "node:string_decoder";

export interface OutputChunk {
  data: string;
  /** Byte offset (UTF-8) of the chunk's first byte in the stream; the client resumes at offset + bytes. */
  offset: number;
}

/**
 * One output stream of a command. Chunks are split on UTF-8 boundaries, and offsets count the
 * bytes of the text sent (so a client's `offset + bytes(data)` always matches ours).
 */
abstract class OutputStream {
  private decoder = new StringDecoder("utf8");
  total = 0;

  append(buf: Buffer): OutputChunk | null {
    return this.push(this.decoder.write(buf));
  }

  end(): OutputChunk | null {
    return this.push(this.decoder.end());
  }

  private push(data: string): OutputChunk | null {
    if (!data) return null;
    const offset = this.total;
    const bytes = Buffer.from(data);
    this.total += bytes.length;
    this.keep(data, bytes, offset);
    return { data, offset };
  }

  protected abstract keep(data: string, bytes: Buffer, offset: number): void;
}

/**
 * HTTP `/execute`: the first `maxBytes` of the stream are kept for the response; the rest is
 * read and dropped (the command never blocks on a full pipe), and `truncated` says so.
 */
export class HeadBuffer extends OutputStream {
  private parts: Buffer[] = [];
  private kept = 0;
  truncated = false;

  constructor(private readonly maxBytes: number) {
    super();
  }

  protected keep(_data: string, bytes: Buffer): void {
    const room = this.maxBytes - this.kept;
    if (room <= 0) {
      this.truncated = true;
      return;
    }
    if (bytes.length > room) {
      this.truncated = true;
      // Cut on a UTF-8 boundary: never half a character.
      let cut = room;
      while (cut > 0 && (bytes[cut] & 0xc0) === 0x80) cut--;
      bytes = bytes.subarray(0, cut);
    }
    this.parts.push(bytes);
    this.kept += bytes.length;
  }

  text(): string {
    return Buffer.concat(this.parts).toString("utf8");
  }
}

/**
 * WebSocket commands: the stream is written to files (segments of a quarter of `maxBytes`, the
 * oldest deleted past `maxBytes`), not kept in memory, so a reconnecting client can replay from
 * any offset still on disk. Files live under the sandbox's command folder and go with `dispose`.
 */
export class SpillBuffer extends OutputStream {
  private segments: Array<{ start: number; bytes: number; file: string; fd: number | null }> = [];
  private readonly segmentBytes: number;
  private failed = false;

  constructor(
    private readonly maxBytes: number,
    private readonly dir: string,
    private readonly name: string,
  ) {
    super();
    this.segmentBytes = Math.max(64 * 1024, Math.floor(maxBytes / 4));
  }

  protected keep(_data: string, bytes: Buffer, offset: number): void {
    if (this.failed) return;
    try {
      let seg = this.segments.at(-1);
      if (!seg || seg.bytes + bytes.length > this.segmentBytes) {
        if (seg?.fd !== null && seg?.fd !== undefined) fs.closeSync(seg.fd);
        if (seg) seg.fd = null;
        fs.mkdirSync(this.dir, { recursive: true, mode: 0o700 });
        // The segment's first offset is in its name, so a restarted platform can still replay it.
        const file = path.join(this.dir, `${this.name}.${offset}`);
        seg = { start: offset, bytes: 0, file, fd: fs.openSync(file, "w", 0o600) };
        this.segments.push(seg);
      }
      fs.writeSync(seg.fd!, bytes);
      seg.bytes += bytes.length;
      while (this.segments.length > 1 && this.keptBytes() > this.maxBytes)
        fs.rmSync(this.segments.shift()!.file, { force: true });
    } catch {
      // The state disk is full or gone: live output still flows to attached clients; only replay is lost.
      this.failed = true;
    }
  }

  private keptBytes(): number {
    return this.segments.reduce((n, s) => n + s.bytes, 0);
  }

  /** Everything from `offset` on that is still kept, in chunks of at most 1 MiB. */
  since(offset: number): OutputChunk[] {
    const out: OutputChunk[] = [];
    const decoder = new StringDecoder("utf8");
    let at = Math.max(offset, this.segments[0]?.start ?? offset);
    for (const seg of this.segments) {
      if (seg.start + seg.bytes <= at) continue;
      let pos = at - seg.start;
      const fd = fs.openSync(seg.file, "r");
      try {
        while (pos < seg.bytes) {
          const buf = Buffer.alloc(Math.min(1 << 20, seg.bytes - pos));
          const got = fs.readSync(fd, buf, 0, buf.length, pos);
          if (got <= 0) break;
          pos += got;
          const data = decoder.write(buf.subarray(0, got));
          if (data) {
            out.push({ data, offset: at });
            at += Buffer.byteLength(data);
          }
        }
      } finally {
        fs.closeSync(fd);
      }
    }
    const rest = decoder.end();
    if (rest) out.push({ data: rest, offset: at });
    return out;
  }

  /** The segments a previous platform process left for `name` in `dir` (read-only replay). */
  static restore(maxBytes: number, dir: string, name: string): SpillBuffer {
    const b = new SpillBuffer(maxBytes, dir, name);
    const files = fs.readdirSync(dir).filter((f) => f.startsWith(`${name}.`) && /^\d+$/.test(f.slice(name.length + 1)));
    for (const f of files.sort((x, y) => Number(x.slice(name.length + 1)) - Number(y.slice(name.length + 1)))) {
      const file = path.join(dir, f);
      b.segments.push({ start: Number(f.slice(name.length + 1)), bytes: fs.statSync(file).size, file, fd: null });
    }
    b.failed = true; // nothing more is written
    return b;
  }

  dispose(): void {
    for (const s of this.segments) {
      if (s.fd !== null) fs.closeSync(s.fd);
      fs.rmSync(s.file, { force: true });
    }
    this.segments = [];
  }
}
