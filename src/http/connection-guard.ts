import type http from "node:http";
import type net from "node:net";
import ipaddr from "ipaddr.js";
import type { Settings } from "../config/index.ts";
import type { Logger } from "../log/logger.ts";

/**
 * Connection caps and timeouts of the control plane's HTTP server. Without them, anyone who can
 * reach the port (no credential needed) holds the process at its descriptor limit with slowly sent
 * request heads: other clients are reset and the platform's own work fails with EMFILE.
 */

export interface ServerTimeouts {
  headersTimeout: number;
  requestTimeout: number;
  keepAliveTimeout: number;
  /** How often Node looks for connections past those timeouts (its default, 30 s, outlives them). */
  connectionsCheckingInterval: number;
}

export function serverTimeouts(
  s: Pick<Settings, "WHARF_HEADERS_TIMEOUT_MS" | "WHARF_REQUEST_TIMEOUT_MS" | "WHARF_KEEP_ALIVE_TIMEOUT_MS">,
): ServerTimeouts {
  const headersTimeout = s.WHARF_REQUEST_TIMEOUT_MS
    ? Math.min(s.WHARF_HEADERS_TIMEOUT_MS, s.WHARF_REQUEST_TIMEOUT_MS)
    : s.WHARF_HEADERS_TIMEOUT_MS;
  return {
    headersTimeout,
    requestTimeout: s.WHARF_REQUEST_TIMEOUT_MS,
    keepAliveTimeout: s.WHARF_KEEP_ALIVE_TIMEOUT_MS,
    connectionsCheckingInterval: Math.max(100, Math.min(1000, Math.floor(headersTimeout / 4))),
  };
}

/** Applies the timeouts to a server already created (the checking interval is a creation option). */
export function applyTimeouts(server: http.Server, t: ServerTimeouts): void {
  server.headersTimeout = t.headersTimeout;
  server.requestTimeout = t.requestTimeout;
  server.keepAliveTimeout = t.keepAliveTimeout;
}

/**
 * The client a per-client cap counts a connection against: an IPv4 address (also IPv4-mapped
 * IPv6), an IPv6 address's /64 (what one host is usually given), or null for loopback, which the
 * per-client cap leaves alone: the platform's own data-plane gateways (every deployment's calls)
 * and a reverse proxy on the host connect from there, and one tenant filling that address's share
 * would lock the others out. Loopback connections count towards the total cap like any other.
 */
export function clientKey(address: string | undefined): string | null {
  if (!address || !ipaddr.isValid(address)) return address ?? "unknown";
  const ip = ipaddr.process(address);
  if (ip.range() === "loopback") return null;
  if (ip.kind() === "ipv4") return ip.toString();
  return `${(ip as ipaddr.IPv6).toNormalizedString().split(":").slice(0, 4).join(":")}::/64`;
}

export interface ConnectionCaps {
  total: number;
  perClient: number;
}

export type Admission = "admit" | "admit-evicting" | "refuse-client" | "refuse-total";

/**
 * Whether a new connection from a client with `fromClient` open connections may stay, with `open`
 * connections in all and `evictable` of them not past their request head. A cap of 0 is no cap.
 */
export function admission(caps: ConnectionCaps, open: number, fromClient: number, evictable: number): Admission {
  if (caps.perClient && fromClient >= caps.perClient) return "refuse-client";
  if (!caps.total || open < caps.total) return "admit";
  return evictable > 0 ? "admit-evicting" : "refuse-total";
}

/**
 * Counts the server's connections by client; closes a connection past the per-client cap, and past
 * the total cap replaces the oldest connection that never sent a complete request head (a slow or
 * silent one) with the new one, so that a flood of slow heads cannot lock everyone else out.
 */
export function guardConnections(
  server: http.Server,
  caps: ConnectionCaps,
  headersTimeoutMs: number,
  log: Logger,
): void {
  if (!caps.total && !caps.perClient) return;
  const byClient = new Map<string, number>();
  // Insertion order is age order: the first entry is the oldest connection still waiting for a head.
  const waiting = new Set<net.Socket>();
  const started = new WeakMap<net.Socket, number>();
  let open = 0;
  let refused = 0;
  const noteRefusal = (reason: string, client: string | null) => {
    // One line per 1000 refusals: a flood must not flood the log too.
    if (refused++ % 1000 === 0) log.warn({ client, reason, refused }, "connection refused by the connection caps");
  };
  server.on("connection", (socket: net.Socket) => {
    // A connection still open past the header timeout sent its head (Node closes the others): an
    // upgraded WebSocket, which no "request" event marks. Listening for "upgrade" here would change
    // how the server treats upgrades, so such connections leave the waiting list by age instead.
    const sentHead = Date.now() - headersTimeoutMs * 2;
    for (const s of waiting) {
      if ((started.get(s) ?? 0) > sentHead) break;
      waiting.delete(s);
    }
    const client = clientKey(socket.remoteAddress);
    const verdict = admission(caps, open, client === null ? 0 : (byClient.get(client) ?? 0), waiting.size);
    if (verdict === "refuse-client" || verdict === "refuse-total") {
      noteRefusal(verdict === "refuse-client" ? "per-client cap" : "total cap", client);
      socket.destroy();
      return;
    }
    if (verdict === "admit-evicting") {
      const oldest = waiting.values().next().value!;
      waiting.delete(oldest);
      oldest.destroy();
    }
    open++;
    if (client !== null) byClient.set(client, (byClient.get(client) ?? 0) + 1);
    waiting.add(socket);
    started.set(socket, Date.now());
    socket.once("close", () => {
      open--;
      waiting.delete(socket);
      if (client === null) return;
      const left = (byClient.get(client) ?? 1) - 1;
      if (left > 0) byClient.set(client, left);
      else byClient.delete(client);
    });
  });
  server.on("request", (req: http.IncomingMessage) => waiting.delete(req.socket));
}

/** The settings' timeouts and caps on a server (created with `serverTimeouts` as its options, for the checking interval). */
export function hardenServer(server: http.Server, s: Settings, log: Logger): void {
  const t = serverTimeouts(s);
  applyTimeouts(server, t);
  guardConnections(
    server,
    { total: s.WHARF_MAX_CONNECTIONS, perClient: s.WHARF_MAX_CONNECTIONS_PER_CLIENT },
    t.headersTimeout,
    log,
  );
}
