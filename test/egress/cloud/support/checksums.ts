/** CRC32 (IEEE) and CRC32C (Castagnoli) for checking the SDK's flexible-checksum trailers. */
function table(poly: number): Uint32Array {
  const t = new Uint32Array(256);
  for (let i = 0; i < 256; i++) {
    let c = i;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ poly : c >>> 1;
    t[i] = c >>> 0;
  }
  return t;
}
const TABLES = { crc32: table(0xedb88320), crc32c: table(0x82f63b78) };

export class Crc {
  private c = 0xffffffff;
  private readonly t: Uint32Array;
  constructor(kind: "crc32" | "crc32c") {
    this.t = TABLES[kind];
  }
  update(b: Uint8Array): this {
    let c = this.c;
    for (let i = 0; i < b.length; i++) c = this.t[(c ^ b[i]) & 0xff] ^ (c >>> 8);
    this.c = c;
    return this;
  }
  base64(): string {
    const v = (this.c ^ 0xffffffff) >>> 0;
    return Buffer.from([v >>> 24, (v >>> 16) & 0xff, (v >>> 8) & 0xff, v & 0xff]).toString("base64");
  }
}
