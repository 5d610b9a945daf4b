import http from "node:http";
import { socketOf } from "../runtime/agent-process.ts";
import { UPSTREAM_IDLE_MS } from "../runtime/keep-alive.ts";
import { upstreamFailure } from "./upstream-failure.ts";

/**
 * Kept-alive connections to agent servers. The pool drops a connection idle for UPSTREAM_IDLE_MS,
 * long before the agent server would close it, so that the two never race on an idle connection;
 * `timeout` only emits an event on a connection in use (a quiet stream goes on).
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: 256, keepAliveMsecs: 1000, timeout: UPSTREAM_IDLE_MS });

type Init = { method: string; headers: http.OutgoingHttpHeaders; body: Buffer | null; signal?: AbortSignal };

/**
 * One HTTP request to an agent server at its serving URL: `unix:/path/agent.sock` (a confined
 * revision) or `http://host:port`. Resolves with the response head; the body streams. A request
 * that met a kept-alive connection the server had already closed is sent once more on a new
 * connection of its own: the server never read it (see `upstreamFailure`), and on a busy machine
 * the platform can notice such a close late whatever the timeouts.
 */
export async function sendUpstream(base: string, pathAndQuery: string, init: Init): Promise<http.IncomingMessage> {
  try {
    return await sendOnce(base, pathAndQuery, init, agent);
  } catch (err) {
    if (upstreamFailure(err as NodeJS.ErrnoException) !== "stale-socket" || init.signal?.aborted) throw err;
    // `agent: false`: a connection of its own, never another pooled one that may be stale too.
    return await sendOnce(base, pathAndQuery, init, false);
  }
}

function sendOnce(
  base: string,
  pathAndQuery: string,
  init: Init,
  via: http.Agent | false,
): Promise<http.IncomingMessage> {
  const socketPath = socketOf(base);
  return new Promise((resolve, reject) => {
    const opts: http.RequestOptions = { method: init.method, headers: init.headers, agent: via, signal: init.signal };
    const req = socketPath
      ? http.request({ ...opts, socketPath, path: pathAndQuery }, resolve)
      : http.request(new URL(pathAndQuery, base), opts, resolve);
    req.once("error", (err: NodeJS.ErrnoException & { reusedSocket?: boolean }) => {
      err.reusedSocket = req.reusedSocket;
      reject(err);
    });
    req.end(init.body ?? undefined);
  });
}

/** A whole small request: status and body text. */
export async function fetchUpstream(
  base: string,
  pathAndQuery: string,
  init: {
    method?: string;
    headers?: http.OutgoingHttpHeaders;
    json?: unknown;
    signal?: AbortSignal;
    timeoutMs?: number;
  },
): Promise<{ status: number; text: string }> {
  const body = init.json === undefined ? null : Buffer.from(JSON.stringify(init.json));
  const headers: http.OutgoingHttpHeaders = {
    ...init.headers,
    ...(body ? { "content-type": "application/json", "content-length": String(body.length) } : {}),
  };
  const signal = AbortSignal.any([
    ...(init.signal ? [init.signal] : []),
    AbortSignal.timeout(init.timeoutMs ?? 10_000),
  ]);
  const res = await sendUpstream(base, pathAndQuery, { method: init.method ?? "GET", headers, body, signal });
  const chunks: Buffer[] = [];
  for await (const c of res) chunks.push(c as Buffer);
  return { status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString("utf8") };
}
