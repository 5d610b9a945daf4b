import http from "node:http";
import type { Duplex } from "node:stream";

/** Headers of one connection (RFC 9110 §7.6.1), never forwarded; `host` is (the owner routes by it). */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

const agent = new http.Agent({ keepAlive: true, maxSockets: 512, keepAliveMsecs: 1000 });

function forwardedHeaders(
  req: http.IncomingMessage,
  extra: Record<string, string>,
  keepUpgrade: boolean,
): http.OutgoingHttpHeaders {
  const out: http.OutgoingHttpHeaders = {};
  for (const [k, v] of Object.entries(req.headers)) {
    if (v === undefined || (HOP_BY_HOP.has(k) && !(keepUpgrade && (k === "upgrade" || k === "connection")))) continue;
    out[k] = v;
  }
  const from = req.socket.remoteAddress;
  if (from)
    out["x-forwarded-for"] = req.headers["x-forwarded-for"]
      ? `${String(req.headers["x-forwarded-for"])}, ${from}`
      : from;
  return { ...out, ...extra };
}

function problem(res: http.ServerResponse, status: number, detail: string): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const body = JSON.stringify({ detail });
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(body),
    ...(status === 503 ? { "retry-after": "1" } : {}),
  });
  res.end(body);
}

/**
 * Sends the request to the replica at `base` as it came (method, target, headers, streamed body)
 * and streams the answer back. A failure before the answer's head is a 502; one midway cuts the
 * client's response short, never a truncated body that looks whole.
 */
export function forwardRequest(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  base: string,
  auth: Record<string, string>,
): void {
  const up = http.request(new URL(req.url ?? "/", base), {
    method: req.method,
    headers: forwardedHeaders(req, auth, false),
    agent,
  });
  up.once("response", (upRes) => {
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(upRes.headers)) if (v !== undefined && !HOP_BY_HOP.has(k)) headers[k] = v;
    res.writeHead(upRes.statusCode ?? 502, headers);
    upRes.pipe(res);
    upRes.once("error", () => res.destroy());
    upRes.once("aborted", () => res.destroy());
  });
  up.once("error", (err) => problem(res, 502, `The replica that runs this workload did not answer: ${err.message}`));
  // The client leaving ends the forwarded exchange (the owner then sees its own client go).
  res.once("close", () => {
    if (!res.writableFinished) up.destroy();
  });
  req.pipe(up);
}

function rawHead(status: number, message: string, headers: http.IncomingHttpHeaders | Record<string, string>): string {
  const lines = [`HTTP/1.1 ${status} ${message}`];
  for (const [k, v] of Object.entries(headers))
    for (const one of Array.isArray(v) ? v : [v]) if (one !== undefined) lines.push(`${k}: ${one}`);
  return lines.join("\r\n") + "\r\n\r\n";
}

/** Answers an upgrade request on its raw socket and closes it. */
export function refuseUpgrade(socket: Duplex, status: number, detail: string): void {
  const body = JSON.stringify({ detail });
  socket.end(
    rawHead(status, http.STATUS_CODES[status] ?? "Error", {
      "content-type": "application/json",
      "content-length": String(Buffer.byteLength(body)),
      connection: "close",
    }) + body,
  );
}

/** Forwards an HTTP upgrade (a WebSocket) to the replica at `base` and splices the two sockets. */
export function forwardUpgrade(
  req: http.IncomingMessage,
  socket: Duplex,
  head: Buffer,
  base: string,
  auth: Record<string, string>,
): void {
  socket.on("error", () => socket.destroy()); // the client went away: the other side is closed below
  const up = http.request(new URL(req.url ?? "/", base), {
    method: req.method,
    headers: forwardedHeaders(req, auth, true),
  });
  up.once("upgrade", (upRes, upSocket, upHead) => {
    socket.write(rawHead(101, "Switching Protocols", upRes.headers));
    if (upHead.length) socket.write(upHead);
    if (head.length) upSocket.write(head);
    upSocket.on("error", () => socket.destroy());
    socket.on("close", () => upSocket.destroy());
    upSocket.on("close", () => socket.destroy());
    upSocket.pipe(socket);
    socket.pipe(upSocket);
  });
  up.once("response", (upRes) => {
    // Refused by the owner (401, 404, …): the client gets that answer as it was.
    const headers = { ...upRes.headers, connection: "close" };
    delete headers["transfer-encoding"];
    const chunks: Buffer[] = [];
    upRes.on("data", (c: Buffer) => chunks.push(c));
    upRes.once("end", () => {
      const body = Buffer.concat(chunks);
      socket.end(
        Buffer.concat([
          Buffer.from(
            rawHead(upRes.statusCode ?? 502, upRes.statusMessage ?? "", {
              ...headers,
              "content-length": String(body.length),
            }),
          ),
          body,
        ]),
      );
    });
  });
  up.once("error", (err) =>
    refuseUpgrade(socket, 502, `The replica that runs this workload did not answer: ${err.message}`),
  );
  up.end();
}

/** A control-plane call on a workload, as the app received it (its body already read). */
export interface ControlCall {
  method: string;
  /** Path and query, as signed. */
  target: string;
  headers: Headers;
  body: string | null;
  /** The caller's address, added to `x-forwarded-for`. */
  from?: string;
}

/**
 * Sends a control-plane call to the replica at `base` and returns its answer whole (small JSON
 * answers; a start may wait for the sandbox, so there is no timeout of its own). A failure to reach
 * it is a 502.
 */
export function sendControlCall(call: ControlCall, base: string, auth: Record<string, string>): Promise<Response> {
  const headers: http.OutgoingHttpHeaders = {};
  call.headers.forEach((v, k) => {
    if (!HOP_BY_HOP.has(k) && k !== "content-length") headers[k] = v;
  });
  if (call.from)
    headers["x-forwarded-for"] = headers["x-forwarded-for"]
      ? `${String(headers["x-forwarded-for"])}, ${call.from}`
      : call.from;
  const body = call.body === null ? null : Buffer.from(call.body);
  if (body) headers["content-length"] = String(body.length);
  return new Promise((resolve) => {
    const answer = (status: number, detail: string) => resolve(Response.json({ detail }, { status }));
    const up = http.request(new URL(call.target, base), {
      method: call.method,
      headers: { ...headers, ...auth },
      agent,
    });
    up.once("response", (upRes) => {
      const chunks: Buffer[] = [];
      upRes.on("data", (c: Buffer) => chunks.push(c));
      upRes.once("error", (err) =>
        answer(502, `The replica that runs this workload cut its answer short: ${err.message}`),
      );
      upRes.once("end", () => {
        const out = new Headers();
        for (const [k, v] of Object.entries(upRes.headers))
          if (v !== undefined && !HOP_BY_HOP.has(k) && k !== "content-length")
            for (const one of Array.isArray(v) ? v : [v]) out.append(k, one);
        const status = upRes.statusCode ?? 502;
        resolve(
          new Response(status === 204 || status === 304 ? null : Buffer.concat(chunks), { status, headers: out }),
        );
      });
    });
    up.once("error", (err) => answer(502, `The replica that runs this workload did not answer: ${err.message}`));
    up.end(body ?? undefined);
  });
}
