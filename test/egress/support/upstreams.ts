import fs from "node:fs";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import tls from "node:tls";
import type { TestContext } from "node:test";
import { WebSocketServer } from "ws";
import { createCa, LeafMinter, type CaMaterial } from "../../../src/egress/proxy/certificates.ts";

/** What an echo upstream saw: method, target, raw headers, body size. */
export interface Echo {
  server: string;
  method: string;
  url: string;
  headers: Record<string, string | string[]>;
  rawHeaders: string[];
  bodyBytes: number;
}

export interface Upstreams {
  address: string;
  ca: CaMaterial;
  caFile: string;
  dir: string;
  httpPort: number;
  httpsPort: number;
  /** A TLS server that is not HTTP: it answers "tls-echo:<what it read>" (raw tunnel checks). */
  rawTlsPort: number;
  /** A plain TCP echo server (raw TCP checks). */
  tcpPort: number;
  /** Every request the HTTP(S) servers received, in order. */
  seen: Echo[];
  leafPem: string;
}

function echoHandler(name: string, seen: Echo[]) {
  return (req: http.IncomingMessage, res: http.ServerResponse) => {
    let bodyBytes = 0;
    req.on("data", (c: Buffer) => (bodyBytes += c.length));
    req.on("end", () => {
      const echo: Echo = {
        server: name,
        method: req.method ?? "",
        url: req.url ?? "",
        headers: req.headers as Record<string, string | string[]>,
        rawHeaders: req.rawHeaders,
        bodyBytes,
      };
      seen.push(echo);
      if (req.url?.startsWith("/big")) {
        res.writeHead(200, { "content-type": "application/octet-stream" });
        res.end(Buffer.alloc(1 << 20, 7));
        return;
      }
      const body = JSON.stringify(echo);
      res.writeHead(200, {
        "content-type": "application/json",
        "content-length": Buffer.byteLength(body),
        "x-upstream": name,
      });
      res.end(body);
    });
  };
}

const listen = (server: net.Server, address: string) =>
  new Promise<number>((resolve, reject) =>
    server.once("error", reject).listen(0, address, () => resolve((server.address() as net.AddressInfo).port)),
  );

/**
 * Loopback upstreams for proxy tests, on `address` (a 127.0.0.x the proxy is allowed to reach by
 * operator setting), with their own test CA whose leaf covers the given names and the address.
 */
export async function startUpstreams(
  t: TestContext,
  names: string[] = ["api.test", "other.test", "ws.test", "raw.test", "tcp.test"],
  address = "127.0.0.2",
): Promise<Upstreams> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wharf-egress-up-"));
  const ca = await createCa("Wharf test upstream CA");
  const minter = new LeafMinter(ca);
  // One leaf for all names: mint per name and serve by SNI.
  const contexts = new Map<string, tls.SecureContext>();
  for (const n of names) contexts.set(n, await minter.contextFor({ kind: "name", host: n }));
  const ipContext = await minter.contextFor({ kind: "ipv4", host: address });
  const leafPem = await minter.certificatePem({ kind: "name", host: names[0] });
  const caFile = path.join(dir, "upstream-ca.pem");
  fs.writeFileSync(caFile, ca.certPem);
  const seen: Echo[] = [];
  const sni = (name: string, cb: (err: Error | null, ctx?: tls.SecureContext) => void) =>
    cb(null, contexts.get(name) ?? ipContext);

  const httpServer = http.createServer(echoHandler("http", seen));
  const httpsServer = https.createServer({ SNICallback: sni, secureContext: ipContext }, echoHandler("https", seen));
  for (const s of [httpServer, httpsServer]) {
    const wss = new WebSocketServer({ noServer: true });
    s.on("upgrade", (req, socket, head) =>
      wss.handleUpgrade(req, socket, head, (ws) => {
        ws.send(JSON.stringify({ headers: req.headers }));
        ws.on("message", (m) => ws.send(`echo:${m.toString()}`));
      }),
    );
  }
  const rawTls = tls.createServer({ SNICallback: sni, secureContext: ipContext }, (s) => {
    s.once("data", (d) => s.end(`tls-echo:${d.toString()}`));
    s.on("error", () => {});
  });
  const tcp = net.createServer((s) => {
    s.on("data", (d) => s.write(`tcp-echo:${d.toString()}`));
    s.on("error", () => {});
  });
  const open = new Set<net.Socket>();
  for (const s of [rawTls, tcp])
    s.on("connection", (c: net.Socket) => (open.add(c), c.once("close", () => open.delete(c))));
  const [httpPort, httpsPort, rawTlsPort, tcpPort] = await Promise.all([
    listen(httpServer, address),
    listen(httpsServer, address),
    listen(rawTls, address),
    listen(tcp, address),
  ]);
  t.after(async () => {
    for (const s of [httpServer, httpsServer]) s.closeAllConnections();
    for (const c of open) c.destroy();
    await Promise.all([httpServer, httpsServer, rawTls, tcp].map((s) => new Promise((r) => s.close(r))));
    fs.rmSync(dir, { recursive: true, force: true });
  });
  return { address, ca, caFile, dir, httpPort, httpsPort, rawTlsPort, tcpPort, seen, leafPem };
}

/**
 * The operator `WHARF_EGRESS_HOSTS` value mapping test names to the upstreams: `name:80` and
 * `name:443` go to the HTTP and HTTPS servers, `raw.test:8443` to the raw TLS server,
 * `tcp.test:5432` to the TCP echo server.
 */
export function hostsSetting(up: Upstreams, names = ["api.test", "other.test", "ws.test"]): string {
  const entries: string[] = [];
  for (const n of names) entries.push(`${n}:80=${up.address}:${up.httpPort}`, `${n}:443=${up.address}:${up.httpsPort}`);
  entries.push(`raw.test:8443=${up.address}:${up.rawTlsPort}`, `tcp.test:5432=${up.address}:${up.tcpPort}`);
  return entries.join(",");
}

/**
 * The operator's egress settings for a platform started in this process: test names resolve to
 * the loopback upstreams only (`hosts` when the test maps its own names), and no internal address
 * is reachable but the upstreams' (and `allowInternal`).
 */
export function useUpstreamsForEgress(up: Upstreams, opts: { hosts?: string; allowInternal?: string[] } = {}): void {
  Object.assign(process.env, {
    WHARF_EGRESS_HOSTS: opts.hosts ?? hostsSetting(up),
    WHARF_EGRESS_ALLOW_INTERNAL: [`${up.address}/32`, ...(opts.allowInternal ?? [])].join(","),
    WHARF_EGRESS_UPSTREAM_CA_FILE: up.caFile,
    WHARF_EGRESS_SYSTEM_DNS: "0",
  });
}

/**
 * A TLS front on the upstreams' address that presents the given names (signed by the upstream
 * CA) and pipes each connection to a plain server on loopback: gives a stand-in (S3, a Google API)
 * the real host names the cloud engines match on. Returns the `WHARF_EGRESS_HOSTS` entries.
 */
export async function startTlsFront(
  t: TestContext,
  up: Upstreams,
  names: string[],
  backAddress: string,
  backPort: number,
): Promise<string[]> {
  const minter = new LeafMinter(up.ca);
  const contexts = new Map<string, tls.SecureContext>();
  for (const n of names) contexts.set(n, await minter.contextFor({ kind: "name", host: n }));
  const front = tls.createServer(
    { SNICallback: (n, cb) => cb(null, contexts.get(n)), secureContext: contexts.get(names[0]) },
    (c) => {
      const back = net.connect(backPort, backAddress);
      c.pipe(back).pipe(c);
      c.on("error", () => back.destroy());
      back.on("error", () => c.destroy());
      // A stand-in that answers and closes while the client is still sending (an error before the
      // body was read) can leave `c` paused by the pipe's backpressure, and unpiping does not resume
      // it: nothing would read its end, so it was never destroyed and `front.close` waited forever.
      back.on("close", () => c.resume());
    },
  );
  const open = new Set<net.Socket>();
  front.on("connection", (raw: net.Socket) => (open.add(raw), raw.once("close", () => open.delete(raw))));
  const port = await listen(front, up.address);
  t.after(() => new Promise((r) => (open.forEach((c) => c.destroy()), front.close(r))));
  return names.map((n) => `${n}:443=${up.address}:${port}`);
}
