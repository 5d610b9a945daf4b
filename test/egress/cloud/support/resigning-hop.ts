/**
 * The test's stand-in for the egress proxy's per-request path, applying the AWS engine exactly as
 * the proxy should: an HTTPS listener (the sandbox's view of `*.amazonaws.com`), the engine called
 * with the verified host, the wire request-target and raw header pairs, then either the refusal
 * answered, or the request forwarded to the upstream (the verifying S3 on loopback) with the
 * engine's headers and body, framing preserved.
 */
import http from "node:http";
import https from "node:https";
import type { AddressInfo } from "node:net";
import tls from "node:tls";
import { awsRefusalResponse } from "../../../../src/egress/credentials/cloud/aws-refusal.ts";
import type { AwsSigningEngine } from "../../../../src/egress/credentials/cloud/aws-signing-engine.ts";
import { pairsFromRawHeaders, type HeaderPairs } from "../../../../src/egress/credentials/cloud/header-pairs.ts";

const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
  "expect",
]);

export interface Hop {
  port: number;
  /** Every request's outcome, in order. */
  outcomes: string[];
  close(): Promise<void>;
}

export async function startResigningHop(opts: {
  cert: string;
  key: string;
  engine: AwsSigningEngine;
  upstreamPort: number;
}): Promise<Hop> {
  const outcomes: string[] = [];
  const upstreamAgent = new http.Agent({ keepAlive: true });
  const server = https.createServer({ cert: opts.cert, key: opts.key }, async (req, res) => {
    const headers = pairsFromRawHeaders(req.rawHeaders);
    const host = String(req.headers.host ?? "")
      .replace(/:\d+$/, "")
      .replace(/\.$/, "")
      .toLowerCase();
    // What the proxy verifies before any credential work: SNI == Host.
    const sni = (req.socket as tls.TLSSocket).servername;
    if (sni && sni.toLowerCase() !== host) {
      res.writeHead(421).end();
      return;
    }
    const hasBody =
      req.headers["content-length"] !== undefined
        ? req.headers["content-length"] !== "0"
        : req.headers["transfer-encoding"] !== undefined;
    const out = await opts.engine.handle({
      method: req.method ?? "GET",
      host,
      target: req.url ?? "/",
      headers,
      body: hasBody ? req : null,
    });
    outcomes.push(
      out.action === "signed"
        ? `signed:${out.payloadMode}`
        : out.action === "refuse"
          ? `refuse:${out.refusal.reason}`
          : "pass",
    );
    if (out.action === "refuse") {
      const answer = awsRefusalResponse(out.refusal);
      req.resume();
      res.writeHead(answer.status, answer.headers).end(answer.body);
      return;
    }
    const fwdHeaders: HeaderPairs = (out.action === "signed" ? out.headers : headers).filter(
      ([n]) => !HOP_BY_HOP.has(n.toLowerCase()),
    );
    const body = out.action === "signed" ? out.body : hasBody ? req : null;
    const flat: string[] = fwdHeaders.flat();
    const up = http.request(
      {
        host: "127.0.0.1",
        port: opts.upstreamPort,
        method: req.method,
        path: req.url,
        headers: flat,
        agent: upstreamAgent,
      },
      (upRes) => {
        res.writeHead(upRes.statusCode ?? 502, upRes.rawHeaders);
        upRes.pipe(res);
      },
    );
    up.on("error", () => (res.headersSent ? res.destroy() : res.writeHead(502).end()));
    if (body) {
      body.on("error", (err) => {
        up.destroy();
        if (!res.headersSent)
          res.writeHead(400, { "content-type": "text/plain" }).end(`wharf egress proxy: ${err.message}`);
      });
      body.pipe(up);
    } else up.end();
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return {
    port: (server.address() as AddressInfo).port,
    outcomes,
    close: () =>
      new Promise<void>((r) => {
        upstreamAgent.destroy();
        server.closeAllConnections();
        server.close(() => r());
      }),
  };
}

/** An https.Agent that sends every connection to the hop, keeping the name for SNI and certificate checks. */
export function routedAgent(port: number, ca: string): https.Agent {
  const agent = new https.Agent({ keepAlive: true, ca });
  (
    agent as unknown as { createConnection: (o: tls.ConnectionOptions, cb: unknown) => tls.TLSSocket }
  ).createConnection = (o) =>
    tls.connect({ ...o, host: "127.0.0.1", port, servername: (o.servername as string) || (o.host as string) });
  return agent;
}
