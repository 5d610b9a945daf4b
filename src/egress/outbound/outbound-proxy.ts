import http from "node:http";
import net from "node:net";
import { parseAuthority } from "../policy/canonical-host.ts";
import { checkOutbound, type OutboundPolicy } from "./outbound-policy.ts";
import { splice } from "./splice.ts";

/**
 * A small forward proxy (CONNECT tunnels and plain-HTTP absolute-form requests) that applies the
 * outbound address policy: started for one pull or clone and given to that command as its proxy,
 * so every connection it makes, redirects and token realms included, is checked. A refused
 * destination is never dialled and answers 403; a failed dial answers 502 with no reason, so
 * nothing tells an open port from a closed one. Refusals are kept for the caller's error text.
 */
export interface OutboundProxy {
  /** `http://127.0.0.1:<port>` */
  url: string;
  /** Why destinations were refused, in order (for the caller's error). */
  refusals: string[];
  /** Whether the bytes received from upstreams passed `maxBytes` (every connection was then cut). */
  readonly overLimit: boolean;
  close(): Promise<void>;
}

const CONNECT_TIMEOUT_MS = 15_000;
const HOP_BY_HOP = new Set([
  "proxy-authorization",
  "proxy-connection",
  "connection",
  "keep-alive",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

function dial(address: string, port: number): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: address, port });
    s.setTimeout(CONNECT_TIMEOUT_MS, () => s.destroy(new Error("connect timeout")));
    s.once("connect", () => {
      s.setTimeout(0);
      resolve(s);
    });
    s.once("error", reject);
  });
}

/** One outbound proxy's state: its policy, what it refused, its open sockets and the bytes received. */
interface OutboundState {
  policy: OutboundPolicy;
  maxBytes: number | undefined;
  refusals: string[];
  sockets: Set<net.Socket>;
  received: number;
  overLimit: boolean;
}

/**
 * `maxBytes`: what all upstreams together may send (the whole download of one pull); past it every
 * connection is cut, so a registry cannot fill the platform's disk before anything checks the size.
 */
export async function startOutboundProxy(
  policy: OutboundPolicy,
  opts: { listen?: { path: string }; maxBytes?: number } = {},
): Promise<OutboundProxy> {
  const st: OutboundState = {
    policy,
    maxBytes: opts.maxBytes,
    refusals: [],
    sockets: new Set(),
    received: 0,
    overLimit: false,
  };
  const server = http.createServer((req, res) => void forwardRequest(st, req, res).catch(() => res.destroy()));
  server.on("connection", (s: net.Socket) => track(st, s));
  server.on("connect", (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    client.on("error", () => client.destroy());
    void forwardConnect(st, req, client, head).catch(() => client.destroy());
  });
  const where = opts.listen?.path;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    if (where) server.listen(where, resolve);
    else server.listen(0, "127.0.0.1", resolve);
  });
  const addr = server.address();
  return {
    url: typeof addr === "object" && addr ? `http://127.0.0.1:${addr.port}` : `unix:${where}`,
    refusals: st.refusals,
    get overLimit() {
      return st.overLimit;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of st.sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function track(st: OutboundState, s: net.Socket): void {
  st.sockets.add(s);
  s.once("close", () => st.sockets.delete(s));
}

/** Counts what upstreams sent; past the limit every connection is cut. */
function count(st: OutboundState, chunk: Buffer): void {
  st.received += chunk.length;
  if (st.maxBytes === undefined || st.received <= st.maxBytes || st.overLimit) return;
  st.overLimit = true;
  for (const s of st.sockets) s.destroy();
}

async function decide(
  st: OutboundState,
  authority: string,
  defaultPort: number | null,
): Promise<{ refused: string } | { address: string; port: number }> {
  const target = parseAuthority(authority, defaultPort);
  if (!target) return { refused: `${authority.slice(0, 100)} is not a host` };
  const verdict = await checkOutbound(st.policy, target.host, target.port);
  if ("refused" in verdict) st.refusals.push(verdict.refused);
  return "refused" in verdict ? verdict : { address: verdict.address, port: target.port };
}

/** An absolute-form http:// request: decided, then forwarded with its body and answer streamed. */
async function forwardRequest(st: OutboundState, req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
  let url: URL;
  try {
    url = new URL(req.url ?? "");
    if (url.protocol !== "http:") throw new Error("not http");
  } catch {
    return void res.writeHead(400, { connection: "close" }).end("absolute http:// URLs or CONNECT only\n");
  }
  const verdict = await decide(st, url.host, 80);
  if ("refused" in verdict)
    return void res.writeHead(403, { connection: "close" }).end("refused by the platform's egress policy\n");
  const headers = Object.fromEntries(Object.entries(req.headers).filter(([k]) => !HOP_BY_HOP.has(k)));
  const upstream = http.request({
    host: verdict.address,
    port: verdict.port,
    method: req.method,
    path: `${url.pathname}${url.search}`,
    headers,
    setHost: false,
    timeout: CONNECT_TIMEOUT_MS,
  });
  upstream.on("socket", (s) => track(st, s));
  upstream.on("response", (up) => {
    up.on("data", (chunk: Buffer) => count(st, chunk));
    res.writeHead(
      up.statusCode ?? 502,
      Object.fromEntries(Object.entries(up.headers).filter(([k]) => !HOP_BY_HOP.has(k))),
    );
    up.pipe(res);
  });
  upstream.on("timeout", () => upstream.destroy(new Error("timeout")));
  upstream.on("error", () =>
    res.headersSent ? res.destroy() : res.writeHead(502, { connection: "close" }).end("cannot connect\n"),
  );
  req.pipe(upstream);
}

/** CONNECT: decided, dialled, then spliced. */
async function forwardConnect(
  st: OutboundState,
  req: http.IncomingMessage,
  client: net.Socket,
  head: Buffer,
): Promise<void> {
  const verdict = await decide(st, req.url ?? "", null);
  if ("refused" in verdict)
    return void client.end("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
  let upstream: net.Socket;
  try {
    upstream = await dial(verdict.address, verdict.port);
  } catch {
    // Unreachable: the client is told so; nothing else to report.
    return void client.end("HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
  }
  track(st, upstream);
  upstream.on("data", (chunk: Buffer) => count(st, chunk));
  client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
  if (head.length) upstream.write(head);
  splice(client, upstream);
}
