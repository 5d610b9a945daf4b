import http from "node:http";
import type { Duplex } from "node:stream";

/**
 * The control plane's socket, bound before the platform's modules load, so that `/ok` answers
 * within a few hundred milliseconds of a (re)start. Until the platform attaches its handler, other
 * requests and WebSocket upgrades are held, not refused, and are served as soon as it does: there
 * is no window in which the API answers "not ready". If start-up fails, held requests get 503.
 */
export interface EarlyListener {
  server: http.Server;
  /** Hands every held and future request to the platform. */
  attach(listener: http.RequestListener): void;
  /** Start-up failed: answers held requests 503 and closes the socket. */
  fail(reason: string): void;
}

const isOk = (url: string | undefined) => url === "/ok" || Boolean(url?.startsWith("/ok?"));

/** `options`: the server's creation options (its timeouts: `serverTimeouts`). */
export function listenEarly(host: string, port: number, options: http.ServerOptions = {}): Promise<EarlyListener> {
  let target: http.RequestListener | null = null;
  let failed: string | null = null;
  const heldRequests: Array<[http.IncomingMessage, http.ServerResponse]> = [];
  const heldUpgrades: Array<[http.IncomingMessage, Duplex, Buffer]> = [];
  const refuse = (res: http.ServerResponse) => {
    res.writeHead(503, { "content-type": "application/json", "retry-after": "1" });
    res.end(JSON.stringify({ detail: `Wharf could not start: ${failed}` }));
  };

  const server = http.createServer(options, (req, res) => {
    if (target) return target(req, res);
    if (failed) return refuse(res);
    if (isOk(req.url)) {
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"ok":true}');
      return;
    }
    heldRequests.push([req, res]);
  });
  // Held until the features have attached their own upgrade handlers, then replayed to them.
  const holdUpgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    if (!target) heldUpgrades.push([req, socket, head]);
  };
  server.on("upgrade", holdUpgrade);

  const early: EarlyListener = {
    server,
    attach(listener) {
      target = listener;
      server.off("upgrade", holdUpgrade);
      for (const [req, res] of heldRequests.splice(0)) listener(req, res);
      for (const [req, socket, head] of heldUpgrades.splice(0)) {
        if (server.listenerCount("upgrade") === 0) socket.destroy();
        else server.emit("upgrade", req, socket, head);
      }
    },
    fail(reason) {
      failed = reason;
      for (const [, res] of heldRequests.splice(0)) refuse(res);
      for (const [, socket] of heldUpgrades.splice(0)) socket.destroy();
      server.close();
    },
  };
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve(early);
    });
  });
}
