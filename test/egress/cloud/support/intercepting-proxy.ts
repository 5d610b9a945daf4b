/**
 * The test's stand-in for the egress proxy in front of Google client libraries: an HTTP CONNECT
 * proxy (what HTTPS_PROXY points at) that terminates TLS with a test CA, takes the CONNECT target
 * as the verified destination, calls the Google engine, and forwards to the local API stand-in.
 */
import http from "node:http";
import type { AddressInfo, Socket } from "node:net";
import tls from "node:tls";
import type { GoogleBearerEngine } from "../../../../src/egress/credentials/cloud/google-bearer-engine.ts";
import { pairsFromRawHeaders } from "../../../../src/egress/credentials/cloud/header-pairs.ts";

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authorization",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
]);

export async function startInterceptingProxy(opts: {
  cert: string;
  key: string;
  engine: GoogleBearerEngine;
  upstreamPort: number;
}) {
  const outcomes: string[] = [];
  const destination = new WeakMap<Socket, string>();
  const inner = http.createServer(async (req, res) => {
    const host = destination.get(req.socket) ?? "";
    const hostHeader = String(req.headers.host ?? "")
      .replace(/:443$/, "")
      .toLowerCase();
    if (hostHeader !== host) {
      res.writeHead(421).end("Host does not match the CONNECT target");
      return;
    }
    const headers = pairsFromRawHeaders(req.rawHeaders);
    const out = await opts.engine.handle({ method: req.method ?? "GET", host, target: req.url ?? "/", headers });
    outcomes.push(`${out.action} ${host}${(req.url ?? "").split("?")[0]}`);
    if (out.action === "respond") return void res.writeHead(out.status, out.headers).end(out.body);
    if (out.action === "error")
      return void res.writeHead(502, { "content-type": "text/plain" }).end(out.error.publicMessage);
    if (out.action === "pass") return void res.writeHead(502).end("not expected in this test");
    const up = http.request(
      {
        host: "127.0.0.1",
        port: opts.upstreamPort,
        method: req.method,
        path: req.url,
        headers: out.headers.filter(([n]) => !HOP_BY_HOP.has(n.toLowerCase())).flat(),
      },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.headers);
        upRes.pipe(res);
      },
    );
    up.on("error", () => res.destroy());
    req.pipe(up);
  });
  const outer = http.createServer((_req, res) => res.writeHead(405).end());
  outer.on("connect", (req, socket: Socket, head) => {
    const target = req.url ?? "";
    const host = target.replace(/:443$/, "").toLowerCase();
    socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    if (head.length) socket.unshift(head);
    const secure = new tls.TLSSocket(socket, {
      isServer: true,
      cert: opts.cert,
      key: opts.key,
      ALPNProtocols: ["http/1.1"],
    });
    secure.on("secure", () => {
      // SNI must name the CONNECT target before anything is injected.
      if (secure.servername && secure.servername.toLowerCase() !== host) return secure.destroy();
      destination.set(secure as unknown as Socket, host);
      inner.emit("connection", secure);
    });
    secure.on("error", () => socket.destroy());
  });
  await new Promise<void>((r) => outer.listen(0, "127.0.0.1", r));
  return {
    port: (outer.address() as AddressInfo).port,
    outcomes,
    close: () =>
      new Promise<void>((r) => {
        inner.closeAllConnections();
        outer.closeAllConnections();
        outer.close(() => r());
      }),
  };
}
