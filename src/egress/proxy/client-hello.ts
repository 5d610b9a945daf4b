/**
 * Reads the server name from a TLS ClientHello before the handshake, to check it against the
 * destination the proxy already knows (capture or CONNECT target). The ClientHello may arrive in
 * several TCP reads and even several TLS records (large post-quantum key shares); the handshake
 * message is reassembled from consecutive handshake records. Anything ambiguous is "invalid"
 * (fail closed): two server_name extensions, several names, a non-host_name entry, bytes that are
 * not a printable host name.
 */
export type ClientHelloResult =
  { status: "need-more" } | { status: "ok"; serverName: string | null } | { status: "invalid"; reason: string };

export const looksLikeTls = (first: number) => first === 0x16;

export function parseClientHello(buf: Buffer, maxBytes: number): ClientHelloResult {
  // Reassemble the handshake layer from records.
  const parts: Buffer[] = [];
  let handshakeLen = 0;
  let off = 0;
  let needed = -1;
  while (off + 5 <= buf.length) {
    if (buf[off] !== 0x16) return { status: "invalid", reason: "not a TLS handshake record" };
    if (buf[off + 1] !== 0x03 || buf[off + 2] > 0x04)
      return { status: "invalid", reason: "unsupported TLS record version" };
    const len = buf.readUInt16BE(off + 3);
    if (len === 0 || len > 16384 + 256) return { status: "invalid", reason: "bad TLS record length" };
    if (off + 5 + len > buf.length) break;
    parts.push(buf.subarray(off + 5, off + 5 + len));
    handshakeLen += len;
    off += 5 + len;
    if (needed < 0 && handshakeLen >= 4) {
      const hs = Buffer.concat(parts);
      if (hs[0] !== 0x01) return { status: "invalid", reason: "first handshake message is not a ClientHello" };
      needed = 4 + hs.readUIntBE(1, 3);
      if (needed > maxBytes) return { status: "invalid", reason: "ClientHello too large" };
    }
    if (needed >= 0 && handshakeLen >= needed) return parseBody(Buffer.concat(parts).subarray(4, needed));
  }
  if (buf.length > maxBytes) return { status: "invalid", reason: "ClientHello too large" };
  return { status: "need-more" };
}

function parseBody(b: Buffer): ClientHelloResult {
  try {
    let p = 2 + 32; // client_version, random
    p += 1 + b[p]; // session_id
    p += 2 + b.readUInt16BE(p); // cipher_suites
    p += 1 + b[p]; // compression_methods
    if (p > b.length) return { status: "invalid", reason: "truncated ClientHello" };
    if (p === b.length) return { status: "ok", serverName: null };
    const extEnd = p + 2 + b.readUInt16BE(p);
    if (extEnd !== b.length) return { status: "invalid", reason: "bad extensions length" };
    p += 2;
    let serverName: string | null = null;
    let seen = false;
    while (p < extEnd) {
      const type = b.readUInt16BE(p);
      const len = b.readUInt16BE(p + 2);
      const body = b.subarray(p + 4, p + 4 + len);
      if (p + 4 + len > extEnd) return { status: "invalid", reason: "truncated extension" };
      p += 4 + len;
      if (type !== 0) continue;
      if (seen) return { status: "invalid", reason: "two server_name extensions" };
      seen = true;
      const listLen = body.readUInt16BE(0);
      if (listLen + 2 !== body.length) return { status: "invalid", reason: "bad server_name list" };
      let q = 2;
      while (q < body.length) {
        const nameType = body[q];
        const nameLen = body.readUInt16BE(q + 1);
        const name = body.subarray(q + 3, q + 3 + nameLen);
        if (q + 3 + nameLen > body.length) return { status: "invalid", reason: "truncated server name" };
        q += 3 + nameLen;
        if (nameType !== 0) return { status: "invalid", reason: "server_name entry of a type other than host_name" };
        if (serverName !== null) return { status: "invalid", reason: "several server names" };
        if (nameLen === 0 || nameLen > 253 || !/^[\x21-\x7e]+$/.test(name.toString("latin1")))
          return { status: "invalid", reason: "server name is not a printable host name" };
        serverName = name.toString("latin1");
      }
      if (serverName === null) return { status: "invalid", reason: "empty server_name extension" };
    }
    return { status: "ok", serverName };
  } catch {
    return { status: "invalid", reason: "truncated ClientHello" };
  }
}
