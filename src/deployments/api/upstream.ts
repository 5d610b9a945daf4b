import http from "node:http";
import { socketOf } from "../runtime/agent-process.ts";

const agent = new http.Agent({ keepAlive: true, maxSockets: 256, keepAliveMsecs: 1000 });

/**
 * One HTTP request to an agent server at its serving URL: `unix:/path/agent.sock` (a confined
 * revision) or `http://host:port`. Resolves with the response head; the body streams.
 */
export function sendUpstream(base: string, pathAndQuery: string, init: { method: string; headers: http.OutgoingHttpHeaders; body: Buffer | null; signal?: AbortSignal }): Promise<http.IncomingMessage> {
  const socketPath = socketOf(base);
  return new Promise((resolve, reject) => {
    const opts: http.RequestOptions = { method: init.method, headers: init.headers, agent, signal: init.signal };
    const req = socketPath ? http.request({ ...opts, socketPath, path: pathAndQuery }, resolve) : http.request(new URL(pathAndQuery, base), opts, resolve);
    req.once("error", (err: NodeJS.ErrnoException & { reusedSocket?: boolean }) => {
      err.reusedSocket = req.reusedSocket;
      reject(err);
    });
    req.end(init.body ?? undefined);
  });
}

/** A whole small request: status and body text. */
export async function fetchUpstream(base: string, pathAndQuery: string, init: { method?: string; headers?: http.OutgoingHttpHeaders; json?: unknown; signal?: AbortSignal; timeoutMs?: number }): Promise<{ status: number; text: string }> {
  const body = init.json === undefined ? null : Buffer.from(JSON.stringify(init.json));
  const headers: http.OutgoingHttpHeaders = { ...init.headers, ...(body ? { "content-type": "application/json", "content-length": String(body.length) } : {}) };
  const signal = AbortSignal.any([...(init.signal ? [init.signal] : []), AbortSignal.timeout(init.timeoutMs ?? 10_000)]);
  const res = await sendUpstream(base, pathAndQuery, { method: init.method ?? "GET", headers, body, signal });
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") };
}
