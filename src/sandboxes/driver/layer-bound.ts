import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { Writable } from "node:stream";
import { pipeline } from "node:stream/promises";
import zlib from "node:zlib";

/**
 * Bounds what unpacking an image can write before anything is unpacked: every layer is
 * decompressed once (to nowhere) and its tar stream measured, and the layers together may not
 * exceed the snapshot's capacity. Unpacking writes at most the tar's bytes (whiteouts and hard
 * links only lower it), except for sparse entries, which expand to any size from a few bytes:
 * those are refused. A small compressed layer that inflates past the capacity is refused here,
 * while it is still only CPU.
 */
export class ImageTooLarge extends Error {}

const BLOCK = 512;

/**
 * Walks tar headers in a stream fed chunk by chunk (pure, no I/O): counts bytes and finds sparse
 * entries (GNU type `S`, or `GNU.sparse.*` records in a PAX header, which Go's tar reader expands).
 */
export class TarScanner {
  bytes = 0;
  sparse = false;
  private pending = Buffer.alloc(0);
  /** Bytes of entry data (and padding) still to skip before the next header. */
  private skip = 0;
  /** A PAX header's data is kept (bounded) to look for sparse records. */
  private paxLeft = 0;
  private pax = "";

  push(chunk: Buffer): void {
    this.bytes += chunk.length;
    let buf = this.pending.length ? Buffer.concat([this.pending, chunk]) : chunk;
    for (;;) {
      if (this.skip > 0) {
        const n = Math.min(this.skip, buf.length);
        if (this.paxLeft > 0) {
          const take = Math.min(this.paxLeft, n);
          if (this.pax.length < 65536) this.pax += buf.subarray(0, take).toString("latin1");
          this.paxLeft -= take;
          if (this.paxLeft === 0 && this.pax.includes("GNU.sparse.")) this.sparse = true;
        }
        this.skip -= n;
        buf = buf.subarray(n);
        if (this.skip > 0) break;
      }
      if (buf.length < BLOCK) break;
      const header = buf.subarray(0, BLOCK);
      buf = buf.subarray(BLOCK);
      if (header.every((b) => b === 0)) continue;
      const type = String.fromCharCode(header[156]);
      const size = tarSize(header.subarray(124, 136));
      if (type === "S") this.sparse = true;
      if (type === "x" || type === "g") {
        this.paxLeft = size;
        this.pax = "";
      }
      this.skip = Math.ceil(size / BLOCK) * BLOCK;
    }
    this.pending = Buffer.from(buf);
  }
}

/** A tar size field: octal text, or base-256 when the high bit is set. */
export function tarSize(field: Buffer): number {
  if (field[0] & 0x80) {
    let n = field[0] & 0x7f;
    for (let i = 1; i < field.length; i++) n = n * 256 + field[i];
    return n;
  }
  const text = field.toString("latin1").replace(/\0.*$/s, "").trim();
  return text ? parseInt(text, 8) : 0;
}

interface Descriptor {
  mediaType?: string;
  digest: string;
}

function blobPath(layout: string, digest: string): string {
  const [alg, hex] = digest.split(":");
  if (!/^[a-z0-9]+$/.test(alg ?? "") || !/^[a-f0-9]+$/.test(hex ?? "")) throw new Error(`bad digest ${digest}`);
  return path.join(layout, "blobs", alg, hex);
}

/** The layers of the image tagged `tag` in an OCI layout, in order. */
async function layersOf(layout: string, tag: string): Promise<Descriptor[]> {
  const index = JSON.parse(await fs.promises.readFile(path.join(layout, "index.json"), "utf8")) as {
    manifests: Array<Descriptor & { annotations?: Record<string, string> }>;
  };
  const m =
    index.manifests.find((d) => d.annotations?.["org.opencontainers.image.ref.name"] === tag) ?? index.manifests[0];
  const manifest = JSON.parse(await fs.promises.readFile(blobPath(layout, m.digest), "utf8")) as {
    layers?: Descriptor[];
  };
  return manifest.layers ?? [];
}

/** Decompresses one layer into the scanner; stops as soon as the budget is exceeded. */
async function scanLayer(file: string, mediaType: string, scanner: TarScanner, budget: number): Promise<void> {
  const sink = new Writable({
    write(chunk: Buffer, _enc, cb) {
      scanner.push(chunk);
      cb(scanner.bytes > budget || scanner.sparse ? new ImageTooLarge("over budget") : null);
    },
  });
  const input = fs.createReadStream(file);
  if (mediaType.endsWith("+zstd")) {
    const child = spawn("zstd", ["-dcq"], { stdio: ["pipe", "pipe", "ignore"] });
    const done = pipeline(child.stdout, sink).finally(() => child.kill("SIGKILL"));
    input.pipe(child.stdin).on("error", () => child.kill("SIGKILL"));
    return done;
  }
  if (mediaType.endsWith("+gzip") || mediaType.endsWith(".gzip")) return pipeline(input, zlib.createGunzip(), sink);
  return pipeline(input, sink);
}

/** Throws `ImageTooLarge` when unpacking the image could write more than `capacityBytes`. */
export async function checkUnpackedSize(layout: string, tag: string, capacityBytes: number): Promise<number> {
  const scanner = new TarScanner();
  for (const layer of await layersOf(layout, tag)) {
    try {
      await scanLayer(blobPath(layout, layer.digest), layer.mediaType ?? "", scanner, capacityBytes);
    } catch (err) {
      if (!(err instanceof ImageTooLarge) && scanner.bytes <= capacityBytes && !scanner.sparse) throw err;
    }
    if (scanner.sparse) throw new ImageTooLarge("the image has sparse files, which unpack to any size: refused");
    if (scanner.bytes > capacityBytes)
      throw new ImageTooLarge(
        `the image unpacks to more than the snapshot's fs_capacity_bytes (${capacityBytes} bytes): give a larger capacity or a smaller image`,
      );
  }
  return scanner.bytes;
}
