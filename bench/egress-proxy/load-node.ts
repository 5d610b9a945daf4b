/**
 * The fallback load generator when `wrk` is missing, and the client that holds connections open for
 * the memory figure: plain Node sockets writing one fixed request and reading one HTTP/1.1 answer.
 * It spends more CPU per request than the proxy, so its throughput rows understate every proxy.
 */
import net from "node:net";
import tls from "node:tls";
import type { Row } from "./load-tools.ts";

export type Stream = net.Socket | tls.TLSSocket;

/** Reads one HTTP/1.1 response (Content-Length or chunked) from a stream; resolves with the status. */
export function readResponse(s: Stream, state: { buf: Buffer }): Promise<number> {
  return new Promise((resolve, reject) => {
    const tryParse = (): boolean => {
      const end = state.buf.indexOf("\r\n\r\n");
      if (end < 0) return false;
      const head = state.buf.subarray(0, end).toString("latin1");
      const status = Number(head.slice(9, 12));
      const cl = /\r\ncontent-length:\s*(\d+)/i.exec(head);
      let total: number;
      if (cl) total = end + 4 + Number(cl[1]);
      else if (/\r\ntransfer-encoding:\s*chunked/i.test(head)) {
        const z = state.buf.indexOf("\r\n0\r\n\r\n", end);
        if (z < 0) return false;
        total = z + 7;
      } else total = end + 4;
      if (state.buf.length < total) return false;
      state.buf = state.buf.subarray(total);
      cleanup();
      resolve(status);
      return true;
    };
    const onData = (d: Buffer) => {
      state.buf = state.buf.length ? Buffer.concat([state.buf, d]) : d;
      tryParse();
    };
    const onErr = (e: Error) => {
      cleanup();
      reject(e);
    };
    const onClose = () => onErr(new Error("closed"));
    const cleanup = () => {
      s.off("data", onData);
      s.off("error", onErr);
      s.off("close", onClose);
    };
    s.on("data", onData);
    s.once("error", onErr);
    s.once("close", onClose);
    if (state.buf.length) tryParse();
  });
}

export function connectTcp(port: number, host = "127.0.0.1"): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ port, host, noDelay: true }, () => resolve(s));
    s.once("error", reject);
  });
}

export async function connectTunnel(proxyPort: number, authority: string): Promise<net.Socket> {
  const s = await connectTcp(proxyPort);
  s.write(`CONNECT ${authority} HTTP/1.1\r\nHost: ${authority}\r\n\r\n`);
  const status = await readResponse(s, { buf: Buffer.alloc(0) });
  if (status !== 200) throw new Error(`CONNECT ${status}`);
  return s;
}

export function startTls(socket: net.Socket | null, opts: tls.ConnectionOptions): Promise<tls.TLSSocket> {
  return new Promise((resolve, reject) => {
    const t = tls.connect({ ...opts, ...(socket ? { socket } : {}), ALPNProtocols: ["http/1.1"], session: undefined });
    t.once("secureConnect", () => resolve(t));
    t.once("error", reject);
  });
}

export interface NodeTarget {
  /** Opens a ready stream (plain or TLS) to send requests on. */
  open(): Promise<Stream>;
  request: Buffer;
}

export async function measureNode(
  name: string,
  target: NodeTarget,
  connections: number,
  newConnPerRequest: boolean,
  seconds: number,
): Promise<Row> {
  const latencies: number[] = [];
  let errors = 0;
  const startAt = performance.now() + 500;
  const stopAt = startAt + seconds * 1000;
  const loop = async () => {
    let s: Stream | null = null;
    let state = { buf: Buffer.alloc(0) };
    while (performance.now() < stopAt) {
      const t0 = performance.now();
      try {
        if (!s) {
          s = await target.open();
          state = { buf: Buffer.alloc(0) };
        }
        s.write(target.request);
        if ((await readResponse(s, state)) !== 200) errors++;
        if (newConnPerRequest) {
          s.destroy();
          s = null;
        }
      } catch {
        errors++;
        s?.destroy();
        s = null;
        continue;
      }
      if (t0 >= startAt) latencies.push(performance.now() - t0);
    }
    s?.destroy();
  };
  await Promise.all(Array.from({ length: connections }, loop));
  latencies.sort((a, b) => a - b);
  return {
    name,
    rps: latencies.length / seconds,
    latency: latencies[Math.floor(latencies.length / 2)] ?? NaN,
    errors,
    requests: latencies.length,
  };
}
