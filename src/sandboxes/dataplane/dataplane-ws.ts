import type http from "node:http";
import type { Duplex } from "node:stream";
import { WebSocketServer } from "ws";
import { HttpError } from "../../http/errors.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { DATAPLANE_PREFIX, dataplaneSandbox } from "./dataplane.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import { serveExecuteSocket } from "./execute-socket.ts";

const PATH = new RegExp(`^${DATAPLANE_PREFIX}/([^/]+)/execute/ws/?$`);

function reject(socket: Duplex, status: number, detail: unknown): void {
  const body = JSON.stringify({ detail });
  socket.end(
    `HTTP/1.1 ${status} ${http_status(status)}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  );
}
function http_status(s: number): string {
  return (
    (
      {
        400: "Bad Request",
        401: "Unauthorized",
        403: "Forbidden",
        404: "Not Found",
        503: "Service Unavailable",
      } as Record<number, string>
    )[s] ?? "Error"
  );
}

/**
 * `WS {dataplane_url}/execute/ws`: LangSmith Deployment's protocol. `execute` starts a command and
 * streams `started`, `stdout`/`stderr` with byte offsets, `exit`; `reconnect` re-attaches to a
 * command by id from the offsets the client already has, so a dropped connection loses nothing.
 */
export function attachExecuteWebSocket(server: http.Server, ctx: PlatformContext, manager: SandboxManager): void {
  const wss = new WebSocketServer({ noServer: true, maxPayload: 16 << 20 });
  server.on("upgrade", (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const m = PATH.exec((req.url ?? "").split("?")[0]);
    if (!m) return; // someone else's upgrade
    void (async () => {
      try {
        const headers = new Headers();
        for (const [k, v] of Object.entries(req.headers)) if (typeof v === "string") headers.set(k, v);
        const principal = await ctx.authenticate(headers);
        const row = await manager.wake(await dataplaneSandbox(ctx, principal.workspaceId, decodeURIComponent(m[1])));
        manager.requireLive(row);
        wss.handleUpgrade(req, socket, head, (ws) =>
          serveExecuteSocket(ctx, manager, ws, row.id, principal.workspaceId),
        );
      } catch (err) {
        if (err instanceof HttpError) reject(socket, err.status, err.detail);
        else {
          ctx.log.error({ err }, "websocket upgrade failed");
          reject(socket, 500, "Internal server error");
        }
      }
    })();
  });
}
