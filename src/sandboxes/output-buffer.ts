import { StringDecoder } from "node:string_decoder";

export interface OutputChunk {
  data: string;
  /** Byte offset (UTF-8) of the chunk's first byte in the stream; the client resumes at offset + bytes. */
  offset: number;
}

/**
 * One output stream of a command, kept so a client that lost its connection can re-attach from
 * the byte offset it last saw. Chunks are split on UTF-8 boundaries so offsets computed by clients
 * from the text they received match ours. Past `maxBytes` the oldest chunks are dropped.
 */
export class OutputBuffer {
  private chunks: Array<OutputChunk & { bytes: number }> = [];
  private decoder = new StringDecoder("utf8");
  private kept = 0;
  total = 0;

  constructor(private readonly maxBytes: number) {}

  append(buf: Buffer): OutputChunk | null {
    return this.push(this.decoder.write(buf));
  }

  end(): OutputChunk | null {
    return this.push(this.decoder.end());
  }

  private push(data: string): OutputChunk | null {
    if (!data) return null;
    const bytes = Buffer.byteLength(data);
    const chunk = { data, offset: this.total, bytes };
    this.chunks.push(chunk);
    this.total += bytes;
    this.kept += bytes;
    while (this.kept > this.maxBytes && this.chunks.length > 1) this.kept -= this.chunks.shift()!.bytes;
    return { data, offset: chunk.offset };
  }

  /** Everything from `offset` on that is still kept. */
  since(offset: number): OutputChunk[] {
    const out: OutputChunk[] = [];
    for (const c of this.chunks) {
      if (c.offset + c.bytes <= offset) continue;
      if (c.offset >= offset) out.push({ data: c.data, offset: c.offset });
      else {
        const rest = Buffer.from(c.data).subarray(offset - c.offset);
        out.push({ data: rest.toString("utf8"), offset });
      }
    }
    return out;
  }

  text(): string {
    return this.chunks.map((c) => c.data).join("");
  }
}
