import http from "node:http";
import https from "node:https";
import type net from "node:net";
import { hostForUrl, parseAuthority, type CanonicalHost } from "../policy/canonical-host.ts";
import { normalisePath } from "../policy/path-patterns.ts";
import type { InjectedHeader } from "../policy/policy.ts";
import type { EgressProxy } from "./egress-proxy.ts";
import { responseHeaders, upstreamHeaders } from "./header-filter.ts";
import type { Target } from "./resolver.ts";
import type { ClientRequest } from "./types.ts";
import { credentialsFor } from "./static-credentials.ts";

/** One upgrade request once its destination, Host and path are verified: what deciding and dialling read. */
interface UpgradeContext {
  proxy: EgressProxy;
  req: ClientRequest;
  socket: net.Socket;
  /** Bytes the client sent after the head, for the upstream once the upgrade is done. */
  head: Buffer;
  host: CanonicalHost;
  port: number;
  tls: boolean;
  /** The `Upgrade` header as sent. */
  upgrade: string;
  path: string;
  query: string;
}

/** Answers the upgrade request itself and closes the connection. */
function fail(socket: net.Socket, status: number, text: string): void {
  socket.end(
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\n${text}\n`,
  );
}

/**
 * WebSocket upgrades on an intercepted connection: the same Host verification, access decision,
 * address check and header injection as a request; then bytes are spliced both ways.
 */
export function handleUpgrade(proxy: EgressProxy, req: ClientRequest, socket: net.Socket, head: Buffer): void {
  const ctx = req.ctx;
  if (!ctx || ctx.mode !== "intercept")
    return fail(socket, 400, "egress: upgrades go through CONNECT or a captured connection");
  const sb = ctx.sandbox;
  const host = ctx.host!;
  const port = ctx.port!;
  const audit = (reason: string) =>
    proxy.audit(sb, { kind: "block", decision: "blocked", host: host.host, port, method: req.method, reason });
  // Only WebSocket: any other protocol (h2c among them) would become a pipe the proxy cannot read.
  const upgrade = req.header("upgrade") ?? "";
  const token = upgrade.trim().toLowerCase();
  if (token !== "websocket") {
    audit(`upgrade to ${JSON.stringify(token.slice(0, 40))} refused (only websocket)`);
    return fail(socket, 400, "egress: only websocket upgrades are allowed");
  }
  const hostHeader = req.header("host");
  const h = hostHeader === undefined ? null : parseAuthority(hostHeader, ctx.tls ? 443 : 80);
  if (!h || h.host.host !== host.host || h.port !== port) {
    audit("Host does not match the destination");
    return fail(socket, 421, "egress: Host does not match the destination");
  }
  const url = req.url;
  const q = url.indexOf("?");
  const path = normalisePath(q < 0 ? url : url.slice(0, q));
  if (path === null) return fail(socket, 400, "egress: malformed request path");
  const query = q < 0 ? "" : url.slice(q);
  const uc: UpgradeContext = { proxy, req, socket, head, host, port, tls: ctx.tls, upgrade, path, query };
  void decideUpgrade(uc).catch((err) => proxy.fail(socket, err));
}

/** The access decision and header rule, as for a request; then the upstream is dialled. */
async function decideUpgrade(uc: UpgradeContext): Promise<void> {
  const { proxy, req, host, port, path } = uc;
  const sb = uc.req.ctx!.sandbox;
  const policy = sb.policy;
  const target = await proxy.targets.check(sb, policy, host, port, policy.connectionVerdict(host, port));
  if ("blocked" in target) {
    proxy.audit(sb, {
      kind: "block",
      decision: "blocked",
      host: host.host,
      port,
      method: req.method,
      path,
      reason: target.blocked,
    });
    return fail(uc.socket, 403, `egress blocked: ${target.blocked}`);
  }
  const cred = credentialsFor(policy, host, path);
  if (cred?.error) return fail(uc.socket, 502, `egress: credential for rule ${cred.rule} is unavailable`);
  if (cred?.headers)
    proxy.audit(sb, {
      kind: "inject",
      decision: "injected",
      rule: cred.rule,
      host: host.host,
      port,
      method: req.method,
      path,
      reason: "upgrade",
    });
  dialUpgrade(uc, target, cred?.headers ?? null);
}

/** Sends the upgrade request upstream; a switch is spliced, any other answer relayed and closed. */
function dialUpgrade(uc: UpgradeContext, target: Target, injected: InjectedHeader[] | null): void {
  const { proxy, req, host, port, socket } = uc;
  const authority = port === (uc.tls ? 443 : 80) ? hostForUrl(host) : `${hostForUrl(host)}:${port}`;
  const headers = upstreamHeaders(req, injected, authority);
  headers.push("Connection", "Upgrade", "Upgrade", uc.upgrade);
  const options: https.RequestOptions = {
    host: target.address,
    port: target.port,
    method: req.method,
    path: uc.path + uc.query,
    headers: headers as unknown as http.OutgoingHttpHeaders,
    setHost: false,
    agent: false,
  };
  if (uc.tls)
    Object.assign(options, {
      secureContext: proxy.upstreamContextFor(req.ctx!.sandbox.policy),
      servername: host.kind === "name" ? host.host : undefined,
      minVersion: "TLSv1.2",
    });
  const up = (uc.tls ? https : http).request(options);
  up.on("upgrade", (upRes, upSocket, upHead) => splice(uc, upRes, upSocket, upHead));
  up.on("response", (upRes) => {
    let text = `HTTP/1.1 ${upRes.statusCode} ${upRes.statusMessage}\r\n`;
    const rh = responseHeaders(upRes.rawHeaders);
    for (let i = 0; i < rh.length; i += 2) text += `${rh[i]}: ${rh[i + 1]}\r\n`;
    socket.write(text + "Connection: close\r\n\r\n");
    upRes.pipe(socket);
  });
  up.on("error", (err: NodeJS.ErrnoException) =>
    fail(socket, 502, `egress: upstream connection failed (${err.code ?? "error"})`),
  );
  up.end();
}

/** The upstream switched protocols: its answer goes to the client, then bytes flow both ways. */
function splice(uc: UpgradeContext, upRes: http.IncomingMessage, upSocket: net.Socket, upHead: Buffer): void {
  const { socket, head } = uc;
  let text = `HTTP/1.1 ${upRes.statusCode} ${upRes.statusMessage}\r\n`;
  for (let i = 0; i < upRes.rawHeaders.length; i += 2) text += `${upRes.rawHeaders[i]}: ${upRes.rawHeaders[i + 1]}\r\n`;
  socket.write(text + "\r\n");
  if (upHead.length) socket.write(upHead);
  if (head.length) upSocket.write(head);
  upSocket.pipe(socket);
  socket.pipe(upSocket);
  upSocket.on("error", () => socket.destroy());
  socket.on("error", () => upSocket.destroy());
  upSocket.on("close", () => socket.destroy());
  socket.on("close", () => upSocket.destroy());
}
