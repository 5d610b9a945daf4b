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

/**
 * `maxBytes`: what all upstreams together may send (the whole download of one pull); past it every
 * connection is cut, so a registry cannot fill the platform's disk before anything checks the size.
 */
export async function startOutboundProxy(
  policy: OutboundPolicy,
  opts: { listen?: { path: string }; maxBytes?: number } = {},
): Promise<OutboundProxy> {
  const refusals: string[] = [];
  const sockets = new Set<net.Socket>();
  let received = 0;
  let overLimit = false;
  const count = (chunk: Buffer) => {
    received += chunk.length;
    if (opts.maxBytes === undefined || received <= opts.maxBytes || overLimit) return;
    overLimit = true;
    for (const s of sockets) s.destroy();
  };
  const decide = async (authority: string, defaultPort: number | null) => {
    const target = parseAuthority(authority, defaultPort);
    if (!target) return { refused: `${authority.slice(0, 100)} is not a host` };
    const verdict = await checkOutbound(policy, target.host, target.port);
    if ("refused" in verdict) refusals.push(verdict.refused);
    return "refused" in verdict ? verdict : { address: verdict.address, port: target.port };
  };

  const server = http.createServer((req, res) => {
    void (async () => {
      let url: URL;
      try {
        url = new URL(req.url ?? "");
        if (url.protocol !== "http:") throw new Error("not http");
      } catch {
        return void res.writeHead(400, { connection: "close" }).end("absolute http:// URLs or CONNECT only\n");
      }
      const verdict = await decide(url.host, 80);
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
      upstream.on("socket", (s) => {
        sockets.add(s);
        s.once("close", () => sockets.delete(s));
      });
      upstream.on("response", (up) => {
        up.on("data", count);
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
    })().catch(() => res.destroy());
  });
  server.on("connection", (s: net.Socket) => {
    sockets.add(s);
    s.once("close", () => sockets.delete(s));
  });
  server.on("connect", (req: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    client.on("error", () => client.destroy());
    void (async () => {
      const verdict = await decide(req.url ?? "", null);
      if ("refused" in verdict)
        return void client.end("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
      let upstream: net.Socket;
      try {
        upstream = await dial(verdict.address, verdict.port);
      } catch {
        return void client.end("HTTP/1.1 502 Bad Gateway\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
      }
      sockets.add(upstream);
      upstream.once("close", () => sockets.delete(upstream));
      upstream.on("data", count);
      client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      if (head.length) upstream.write(head);
      splice(client, upstream);
    })().catch(() => client.destroy());
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
    refusals,
    get overLimit() {
      return overLimit;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}
