import type dgram from "node:dgram";
import dnsPacket from "dns-packet";
import { canonicalHost } from "../policy/canonical-host.ts";

/**
 * The sandbox's DNS stub. Every name gets its own synthetic address from 198.18.0.0/15 (a range
 * reserved for benchmarking, never routed), stable for the sandbox's life and never reused for
 * another name — reuse would send one host's connections, and credentials, to another. A connect
 * to that address lands on the proxy's listener in the namespace, which maps it back to the name;
 * the proxy then resolves the real name itself. AAAA queries get an empty answer so clients use
 * IPv4. Names are restricted to DNS label characters, so nothing odd (CR/LF) can reach a Host or
 * CONNECT line through a name.
 */
const BASE = (198 << 24) | (18 << 16); // 198.18.0.0
const SIZE = 1 << 17; // /15
const TTL = 300;

export const FAKE_RANGE = "198.18.0.0/15";

function ipOf(n: number): string {
  const v = (BASE + n) >>> 0;
  return `${v >>> 24}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
}

export function isFakeAddress(address: string): boolean {
  return address.startsWith("198.18.") || address.startsWith("198.19.");
}

export class FakeDns {
  private readonly byName = new Map<string, string>();
  private readonly byAddress = new Map<string, string>();
  private next = 1;
  queries = 0;

  /** `onNew`: told of every name given an address, before the answer leaves (the data plane maps it back). */
  constructor(private readonly onNew: ((address: string, name: string) => void) | null = null) {}

  /** The fake address of a name, allocating one on first use; null when the range is exhausted. */
  addressFor(name: string): string | null {
    const hit = this.byName.get(name);
    if (hit) return hit;
    if (this.next >= SIZE - 1) return null;
    const ip = ipOf(this.next++);
    this.byName.set(name, ip);
    this.byAddress.set(ip, name);
    this.onNew?.(ip, name);
    return ip;
  }

  nameFor(address: string): string | null {
    return this.byAddress.get(address) ?? null;
  }

  /** Builds the answer to one query packet (null for packets that are not queries). */
  answer(packet: Buffer): Buffer | null {
    let q: dnsPacket.Packet;
    try {
      q = dnsPacket.decode(packet);
    } catch {
      // Undecodable (an over-long name, a label past 63 bytes): still an answer, never silence.
      return errorAnswer(packet, NXDOMAIN);
    }
    if (q.type !== "query" || !q.questions || q.questions.length !== 1) return null;
    this.queries++;
    const question = q.questions[0];
    const reply = (rcode: string, answers: dnsPacket.Answer[] = []) =>
      dnsPacket.encode({
        id: q.id,
        type: "response",
        flags: dnsPacket.RECURSION_DESIRED | dnsPacket.RECURSION_AVAILABLE | rcodeFlag(rcode),
        questions: [question],
        answers,
      });
    const name = canonicalHost(question.name);
    if (!name || name.kind !== "name" || question.class !== "IN") return reply("NXDOMAIN");
    if (name.host === "localhost" || name.host.endsWith(".localhost")) {
      return question.type === "A"
        ? reply("NOERROR", [{ type: "A", name: question.name, ttl: TTL, data: "127.0.0.1" }])
        : reply("NOERROR");
    }
    if (question.type !== "A") return reply("NOERROR");
    const ip = this.addressFor(name.host);
    if (!ip) return reply("SERVFAIL");
    return reply("NOERROR", [{ type: "A", name: question.name, ttl: TTL, data: ip }]);
  }

  /** Serves queries arriving on a UDP socket (the stub bound inside the sandbox's namespace). */
  serve(socket: dgram.Socket): void {
    socket.on("message", (msg, rinfo) => {
      let out: Buffer | null;
      try {
        out = this.answer(msg);
      } catch {
        // The encoder refused the echoed question (an over-long name): answer from the raw bytes.
        out = errorAnswer(msg, NXDOMAIN);
      }
      if (out) socket.send(out, rinfo.port, rinfo.address);
    });
    socket.on("error", () => {
      // A UDP send to a client that went away: DNS clients retry, nothing to report.
    });
  }
}

const NXDOMAIN = 3;

const FORMERR = 1;

/**
 * An error answer built from the query's raw bytes (its id, opcode, RD and question section
 * copied as they are): for queries the decoder refuses. A question that cannot even be walked (a
 * label longer than 63 bytes) gets FORMERR without it. Null when it is not a query at all.
 */
export function errorAnswer(packet: Buffer, rcode: number): Buffer | null {
  if (packet.length < 12 || packet[2] & 0x80) return null;
  let o = 12;
  let walkable = packet.readUInt16BE(4) === 1;
  while (walkable && o < packet.length && packet[o] !== 0) {
    if (packet[o] > 63)
      walkable = false; // compression or an extended label type: not echoed
    else o += packet[o] + 1;
  }
  o += 5; // the root label, type and class
  if (!walkable || o > packet.length) {
    o = 12;
    rcode = FORMERR;
  }
  const out = Buffer.alloc(o);
  packet.copy(out, 0, 0, o);
  out[2] = 0x80 | (packet[2] & 0x79); // QR, the query's opcode and RD
  out[3] = 0x80 | rcode; // RA
  out.writeUInt16BE(o > 12 ? 1 : 0, 4);
  out.writeUInt32BE(0, 6);
  out.writeUInt16BE(0, 10);
  return out;
}

function rcodeFlag(rcode: string): number {
  return rcode === "NXDOMAIN" ? 3 : rcode === "SERVFAIL" ? 2 : 0;
}
