import type net from "node:net";
import { canonicalHost } from "../policy/canonical-host.ts";
import { classifyAddress } from "../policy/address-class.ts";
import { isFakeAddress } from "../capture/fake-dns.ts";
import type { EgressProxy } from "../proxy/egress-proxy.ts";

/**
 * What a listener's connections speak. `namespace`: a listener inside the sandbox's network
 * namespace (the destination is the socket's local address). `explicit` / `transparent`: loopback
 * listeners for library use, tests and benchmarks.
 */
export type ListenerRole =
  { kind: "namespace" } | { kind: "explicit" } | { kind: "transparent"; host: string; port: number };

/** A short wait for a name the DNS stub handed out an instant ago (its notice may still be in flight). */
const NAME_GRACE_MS = 250;

/**
 * Dispatches a connection accepted inside the namespace by the address it was aimed at: the
 * explicit proxy port on loopback speaks the proxy protocol; a fake address maps back to its
 * name; any other address is an IP-literal destination. Loopback destinations are the sandbox's
 * own and are never forwarded, whatever the operator allows.
 */
export function dispatchAccepted(
  proxy: EgressProxy,
  sb: { id: string; proxyPort: number; names: Map<string, string> },
  port: number,
  socket: net.Socket,
  role: ListenerRole,
): void {
  const id = sb.id;
  if (role.kind === "explicit") return proxy.acceptExplicit(socket, id);
  if (role.kind === "transparent") {
    const h = canonicalHost(role.host);
    return h ? proxy.acceptTransparent(socket, id, h, role.port) : void socket.destroy();
  }
  const local = (socket.localAddress ?? "").replace(/^::ffff:(?=\d+\.)/, "");
  const localPort = socket.localPort ?? port;
  if (localPort === sb.proxyPort && (local === "127.0.0.1" || local === "::1")) return proxy.acceptExplicit(socket, id);
  if (isFakeAddress(local)) {
    const name = sb.names.get(local);
    if (name) return proxy.acceptTransparent(socket, id, { kind: "name", host: name }, localPort);
    setTimeout(() => {
      const later = sb.names.get(local);
      if (!later) return proxy.refuse(socket, id, local, localPort, "address was not handed out by the sandbox's DNS");
      proxy.acceptTransparent(socket, id, { kind: "name", host: later }, localPort);
    }, NAME_GRACE_MS).unref();
    return;
  }
  const host = canonicalHost(local);
  if (!host || classifyAddress(local) === "loopback")
    return proxy.refuse(socket, id, local, localPort, "the sandbox's own loopback is not a way out");
  proxy.acceptTransparent(socket, id, host, localPort);
}
