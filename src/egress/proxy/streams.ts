import net from "node:net";
import tls from "node:tls";
import { destroySelf, readAtLeast } from "./socket-helpers.ts";
import { CTX, type RawTunnel, type SandboxHandle, type WithCtx } from "./types.ts";
import { isWebPort } from "../policy/access-patterns.ts";
import { canonicalHost, type CanonicalHost } from "../policy/canonical-host.ts";
import { looksLikeTls, parseClientHello } from "./client-hello.ts";
import type { ConnectionVerdict } from "../policy/policy.ts";
import type { EgressProxy } from "./egress-proxy.ts";

const CONNECT_TIMEOUT_MS = 10_000;

// Streams to a known destination (captured, or CONNECTed): raw tunnel, TLS interception or plain HTTP.

/** What intercepted TLS offers, in OpenSSL's wire form once (Node converts an array per socket). */
const ALPN = Buffer.from([2, ...Buffer.from("h2"), 8, ...Buffer.from("http/1.1")]);

/**
 * One byte stream to a known destination, made when it arrives (captured, or after CONNECT): what
 * every step of its handling reads. `connectReply` is the CONNECT socket still owed its answer.
 */
export interface StreamContext {
  proxy: EgressProxy;
  socket: net.Socket;
  sandbox: SandboxHandle;
  host: CanonicalHost;
  port: number;
  connectReply: "pending" | null;
}

/**
 * A byte stream to a known destination: raw tunnel, TLS interception or plain HTTP, decided by
 * the rules and by the first bytes.
 */
export async function handleStream(sc: StreamContext): Promise<void> {
  const { proxy, socket, sandbox: sb, host, port, connectReply } = sc;
  // A reset from the sandbox is routine; whoever owns the socket next adds its own handling.
  if (!socket.listenerCount("error")) socket.on("error", destroySelf);
  const verdict = sb.policy.connectionVerdict(host, port);
  if (verdict.kind === "allow" && verdict.raw) return rawTunnel(sc, verdict);
  if (!isWebPort(port)) {
    const reason = verdict.kind === "deny" ? verdict.reason : "raw TCP is not allowed";
    proxy.audit(sb, { kind: "block", decision: "blocked", host: host.host, port, reason });
    if (connectReply) socket.end(forbidden(reason));
    else socket.destroy();
    return;
  }
  if (connectReply) socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
  // Ports 80/443: always intercepted. A denied destination is still answered (403) over HTTP(S),
  // so the sandbox sees why; the decision is re-made for every request anyway.
  // One deadline for the whole peek: a ClientHello dribbled a byte at a time is cut all the same.
  const deadline = Date.now() + proxy.settings.headerTimeoutMs;
  const first = await readAtLeast(socket, 1, deadline - Date.now());
  if (!first) return void socket.destroy();
  if (looksLikeTls(first[0])) return interceptTls(sc, first, deadline);
  if (!/^[A-Z]/.test(String.fromCharCode(first[0]))) return blocked(sc, "neither HTTP nor TLS on a web port");
  socket.unshift(first);
  (socket as WithCtx)[CTX] = { sandbox: sb, mode: "intercept", host, port, tls: false };
  proxy.front.accept(socket);
}

function forbidden(reason: string): string {
  return `HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nX-Wharf-Egress: blocked\r\nConnection: close\r\n\r\negress blocked: ${reason}\n`;
}

/** A stream refused after its first bytes: audited, closed. */
function blocked(sc: StreamContext, reason: string): void {
  sc.proxy.audit(sc.sandbox, { kind: "block", decision: "blocked", host: sc.host.host, port: sc.port, reason });
  sc.socket.destroy();
}

/** TLS towards a web port: the ClientHello read whole (by `deadline`), its SNI checked, then terminated. */
async function interceptTls(sc: StreamContext, first: Buffer, deadline: number): Promise<void> {
  const { proxy, socket } = sc;
  let buf = first;
  let hello = parseClientHello(buf, proxy.settings.maxPeekBytes);
  while (hello.status === "need-more") {
    const more = await readAtLeast(socket, 1, deadline - Date.now());
    if (!more) return void socket.destroy();
    buf = Buffer.concat([buf, more]);
    hello = parseClientHello(buf, proxy.settings.maxPeekBytes);
  }
  if (hello.status === "invalid") return blocked(sc, `unreadable TLS ClientHello: ${hello.reason}`);
  if (!sniMatches(proxy, hello.serverName, sc.host))
    return blocked(sc, `TLS server name ${JSON.stringify(hello.serverName)} does not match the destination`);
  const context = sc.sandbox.minter.peek(sc.host) ?? (await sc.sandbox.minter.contextFor(sc.host));
  socket.unshift(buf);
  terminateTls(sc, context, deadline);
}

/** Terminates TLS with the minted leaf, then hands the connection to the HTTP/2 or HTTP/1.1 server. */
function terminateTls(sc: StreamContext, context: tls.SecureContext, deadline: number): void {
  const { proxy, sandbox: sb, host, port } = sc;
  const secure = new tls.TLSSocket(sc.socket, { isServer: true, secureContext: context, ALPNProtocols: ALPN });
  secure.on("error", destroySelf);
  // The handshake must finish within what is left of the deadline (the HTTP servers time the rest).
  const handshake = setTimeout(() => secure.destroy(), Math.max(0, deadline - Date.now()));
  const abandoned = () => clearTimeout(handshake);
  secure.once("close", abandoned);
  (secure as WithCtx)[CTX] = { sandbox: sb, mode: "intercept", host, port, tls: true };
  // The protocol is known once the handshake is done: HTTP/2 only for clients that ask for it.
  secure.once("secure", () => {
    clearTimeout(handshake);
    // Nothing of the handshake stays attached to a connection that may idle for long.
    secure.off("close", abandoned);
    // What tls.Server does for its own sockets; an HTTP/2 session waits for it before reading.
    (secure as tls.TLSSocket & { secureConnecting: boolean }).secureConnecting = false;
    if (secure.alpnProtocol === "h2") proxy.h2server.emit("connection", secure);
    else proxy.front.accept(secure);
  });
}

/** SNI must name the destination; it may be absent only when the destination is an IP literal. */
export function sniMatches(proxy: EgressProxy, serverName: string | null, host: CanonicalHost): boolean {
  if (serverName === null) return host.kind !== "name";
  const sni = canonicalHost(serverName);
  return sni !== null && sni.kind === host.kind && sni.host === host.host;
}

export async function rawTunnel(sc: StreamContext, verdict: ConnectionVerdict): Promise<void> {
  const { proxy, socket: client, sandbox: sb, host, port, connectReply } = sc;
  const target = await proxy.targets.check(sb, sb.policy, host, port, verdict);
  if ("blocked" in target) {
    proxy.audit(sb, { kind: "block", decision: "blocked", host: host.host, port, reason: target.blocked });
    if (connectReply) client.end(forbidden(target.blocked));
    else client.destroy();
    return;
  }
  const upstream = net.connect({
    host: target.address,
    port: target.port,
    allowHalfOpen: true,
    noDelay: true,
    timeout: CONNECT_TIMEOUT_MS,
  });
  const tunnel: RawTunnel = { host, port, address: target.address, client, upstream };
  upstream.once("timeout", () => upstream.destroy(new Error("connect timeout")));
  upstream.once("connect", () => {
    upstream.setTimeout(0);
    sb.tunnels.add(tunnel);
    proxy.stats.tunnels++;
    proxy.audit(sb, {
      kind: "tunnel",
      decision: "allowed",
      host: host.host,
      port,
      reason: sb.policy.isNoProxy(host) ? "no_proxy (not intercepted)" : "raw TCP (not intercepted)",
    });
    if (connectReply) client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    client.pipe(upstream);
    upstream.pipe(client);
  });
  const done = () => {
    sb.tunnels.delete(tunnel);
    client.destroy();
    upstream.destroy();
  };
  upstream.once("error", (err) => {
    if (!sb.tunnels.has(tunnel)) {
      proxy.audit(sb, {
        kind: "block",
        decision: "failed",
        host: host.host,
        port,
        reason: `upstream connection failed (${(err as NodeJS.ErrnoException).code ?? err.message})`,
      });
      if (connectReply)
        client.end(
          `HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\negress: upstream connection failed\n`,
        );
    }
    done();
  });
  client.once("error", done);
  upstream.once("close", done);
  client.once("close", done);
}
