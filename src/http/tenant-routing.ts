import type http from "node:http";
import { routedTarget } from "./tenant-hosts.ts";

const ROUTED = Symbol("wharf.tenantRouted");
type Routed = http.IncomingMessage & { [ROUTED]?: true };

/** Points a request on a tenant host at its path-style route, once (upgrades can be replayed). */
function route(req: Routed, domain: string): void {
  if (req[ROUTED]) return;
  req[ROUTED] = true;
  req.url = routedTarget(req.headers.host, req.url ?? "/", domain);
}

/**
 * The control plane's request listener with tenant hosts routed by their Host header before the
 * app sees the request (`tenant-hosts.ts`), so the app's routes serve both forms unchanged.
 */
export function tenantRoutedListener(listener: http.RequestListener, domain: string): http.RequestListener {
  return (req, res) => {
    route(req, domain);
    listener(req, res);
  };
}

/** The same for HTTP upgrades (a sandbox service's WebSocket), ahead of every feature's own handler. */
export function routeTenantUpgrades(server: http.Server, domain: string): void {
  server.prependListener("upgrade", (req: http.IncomingMessage) => route(req, domain));
}
