import net from "node:net";
import type { Readable } from "node:stream";
import tls from "node:tls";
import { HTTPParser } from "./llhttp.ts";

/*
 * The HTTP/1.1 upstream client of the data plane, hand-written on Node's own native llhttp binding.
 *
 * Why not undici here (it still serves HTTP/2 upstreams): measured with bench/egress-proxy.ts on a
 * 2-core machine, a minimal `http.Server` + undici `Pool.dispatch` proxy spends 70-90 µs of CPU per
 * keep-alive request against ~45 µs for the server side alone; undici's share goes to its request
 * objects, handler wrapping, a wasm parser that calls back into JS per header, and queue and timer
 * bookkeeping. This client writes the request head as one string, parses the answer with the same
 * parser Node's own `http` client uses (strict, no lenient flags), and keeps idle sockets per origin:
 * the same pool costs about 10 µs. What it does not do, no request of the proxy needs: pipelining,
 * retries (requests are not idempotent to us), redirects, decompression.
 *
 * Like undici (GHSA-35p6-xmwp-9g52), a socket goes back to the idle list only after a turn of the
 * event loop, so bytes or a FIN the upstream sent after its answer are seen before the socket is
 * reused; any byte arriving while no request is outstanding closes the socket.
 */

/** The upstream clients' limits (HTTP/1.1 here, HTTP/2 in `../h2-upstream.ts`). */
export const CONNECT_TIMEOUT_MS = 10_000;
/** Headers and body each within this of the last byte (what undici's headersTimeout/bodyTimeout were). */
export const ACTIVE_TIMEOUT_MS = 300_000;
export const IDLE_TIMEOUT_MS = 15_000;
/** At most this many connections per origin; further requests wait for one. */
const MAX_CONNECTIONS = 512;

/** A header or method name as RFC 9110 allows it. */
export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const BAD_TARGET = /[^\x21-\xff]/;
const NO_BODY_METHODS = new Set(["GET", "HEAD", "OPTIONS", "TRACE", "CONNECT"]);

export type UpstreamError = Error & { code?: string };

/** Where an answer goes (the client's response): called in order, at most once each but `onData`. */
export interface ResponseSink {
  onHeaders(status: number, statusText: string, rawHeaders: string[]): void;
  /** False: stop reading until `exchange.resume()`. */
  onData(chunk: Buffer): boolean;
  onComplete(trailers: string[]): void;
  onError(err: UpstreamError): void;
}

/** What the request path holds of a request on its way: abort it (the client left), resume it (backpressure). */
export interface UpstreamExchange {
  abort(): void;
  resume(): void;
}

export interface H1Request {
  method: string;
  /** Origin-form target, exactly as sent. */
  target: string;
  /** Flat name/value pairs, `Host` included; hop-by-hop ones already removed. */
  headers: string[];
  body: Readable | null;
}

export interface Origin {
  address: string;
  port: number;
  /** TLS to the upstream (verified against `secureContext`'s roots and `servername`, or the address). */
  tls: { secureContext: tls.SecureContext; servername: string | undefined } | null;
}

export const failure = (message: string, code: string): UpstreamError => Object.assign(new Error(message), { code });

/** Serialises a request head; throws on a method, target or header that cannot go on the wire. */
export function requestHead(req: H1Request): { head: string; chunked: boolean; length: number | null } {
  if (!TOKEN.test(req.method)) throw failure("invalid method", "ERR_INVALID_METHOD");
  if (BAD_TARGET.test(req.target)) throw failure("invalid request target", "ERR_INVALID_TARGET");
  let head = `${req.method} ${req.target} HTTP/1.1\r\n`;
  let length: number | null = null;
  const h = req.headers;
  for (let i = 0; i < h.length; i += 2) {
    const name = h[i];
    const value = h[i + 1];
    if (!TOKEN.test(name) || BAD_VALUE.test(value))
      throw failure(`invalid header ${JSON.stringify(name.slice(0, 64))}`, "ERR_INVALID_HEADER");
    // The framing is this client's: a Transfer-Encoding from the caller would be a second one.
    if (name.length === 17 && name.toLowerCase() === "transfer-encoding")
      throw failure("transfer-encoding is set by the client", "ERR_INVALID_HEADER");
    if (name.length === 14 && name.toLowerCase() === "content-length") {
      if (length !== null || !/^\d{1,15}$/.test(value)) throw failure("invalid content-length", "ERR_INVALID_HEADER");
      length = Number(value);
    }
    head += `${name}: ${value}\r\n`;
  }
  // A streamed body without a length is sent chunked, whatever the method; no body and no length
  // on a method that usually has one is an explicit zero (what undici did).
  const chunked = req.body !== null && length === null;
  if (chunked) head += "transfer-encoding: chunked\r\n";
  else if (req.body === null && length === null && !NO_BODY_METHODS.has(req.method)) head += "content-length: 0\r\n";
  return { head: head + "\r\n", chunked, length };
}

/** One request on its way: abort it when the client leaves; resume it after backpressure. */
export class Exchange implements UpstreamExchange {
  conn: H1Conn | null = null;
  done = false;
  constructor(
    readonly req: H1Request,
    readonly sink: ResponseSink,
    private readonly pool: H1Pool,
  ) {}

  /** The client went away: the upstream connection (mid-answer) cannot be reused. */
  abort(): void {
    if (this.done) return;
    this.done = true;
    if (this.conn) this.conn.socket.destroy();
    else this.pool.dequeue(this);
  }

  resume(): void {
    this.conn?.socket.resume();
  }
}

/** One upstream connection and its parser. */
class H1Conn {
  readonly parser = new HTTPParser();
  current: Exchange | null = null;
  private partial: string[] = [];
  private status = 0;
  private keepAlive = false;
  private bodyDone = true;
  private idle = false;

  constructor(
    readonly socket: net.Socket,
    private readonly pool: H1Pool,
  ) {
    const p = this.parser;
    p.initialize(HTTPParser.RESPONSE, {}, 0, 0);
    p[HTTPParser.kOnHeaders] = (headers: string[]) => void this.partial.push(...headers);
    p[HTTPParser.kOnHeadersComplete] = this.onHeadersComplete;
    p[HTTPParser.kOnBody] = this.onBody;
    p[HTTPParser.kOnMessageComplete] = this.onMessageComplete;
    socket.setTimeout(CONNECT_TIMEOUT_MS);
    socket.on("data", this.onSocketData);
    socket.on("end", this.onEnd);
    socket.on("timeout", this.onTimeout);
    socket.on("error", this.onSocketError);
    socket.on("close", this.onClose);
    socket.on("drain", this.onDrain);
  }

  start(ex: Exchange): void {
    this.idle = false;
    this.socket.ref();
    this.current = ex;
    ex.conn = this;
    this.status = 0;
    let framing: ReturnType<typeof requestHead>;
    try {
      framing = requestHead(ex.req);
    } catch (err) {
      this.current = null;
      ex.done = true;
      ex.sink.onError(err as UpstreamError);
      return this.pool.release(this);
    }
    this.socket.setTimeout(ACTIVE_TIMEOUT_MS);
    const body = ex.req.body;
    this.bodyDone = body === null;
    this.socket.write(framing.head, "latin1");
    if (body) this.sendBody(ex, body, framing.chunked, framing.length);
  }

  private sendBody(ex: Exchange, body: Readable, chunked: boolean, length: number | null): void {
    let sent = 0;
    const stop = () => {
      body.off("data", onData);
      body.off("end", onEnd);
      body.off("error", onError);
    };
    const onData = (chunk: Buffer | string) => {
      if (this.current !== ex) return stop();
      const b = typeof chunk === "string" ? Buffer.from(chunk) : chunk;
      if (b.length === 0) return;
      sent += b.length;
      if (length !== null && sent > length)
        return this.fail(failure("request body longer than its content-length", "ERR_BODY_LENGTH"));
      let ok: boolean;
      if (chunked) {
        this.socket.cork();
        this.socket.write(`${b.length.toString(16)}\r\n`, "latin1");
        this.socket.write(b);
        ok = this.socket.write("\r\n", "latin1");
        this.socket.uncork();
      } else ok = this.socket.write(b);
      if (!ok) body.pause();
    };
    const onEnd = () => {
      stop();
      if (this.current !== ex) return;
      if (length !== null && sent !== length)
        return this.fail(failure("request body shorter than its content-length", "ERR_BODY_LENGTH"));
      if (chunked) this.socket.write("0\r\n\r\n", "latin1");
      this.bodyDone = true;
      this.bodyWaiter = null;
    };
    const onError = (err: Error) => {
      stop();
      if (this.current === ex)
        this.fail(Object.assign(err, { code: (err as UpstreamError).code ?? "ERR_REQUEST_BODY" }));
    };
    this.bodyWaiter = body;
    body.on("data", onData);
    body.once("end", onEnd);
    body.once("error", onError);
  }

  /** The body paused by the socket's backpressure. */
  private bodyWaiter: Readable | null = null;
  private readonly onDrain = () => this.bodyWaiter?.resume();

  private readonly onHeadersComplete = (
    _maj: number,
    _min: number,
    headers: string[] | undefined,
    _method: unknown,
    _url: unknown,
    status: number,
    statusText: string,
    upgrade: boolean,
    keepAlive: boolean,
  ): number => {
    const raw = headers ?? this.partial;
    this.partial = [];
    const ex = this.current;
    this.status = status;
    if (!ex || ex.done || upgrade || status === 101) {
      // An answer nobody asked for, or a protocol switch nobody requested.
      if (ex && !ex.done) this.fail(failure("unexpected upstream upgrade", "ERR_UPSTREAM_PROTOCOL"));
      else this.socket.destroy();
      return 1;
    }
    // 1xx (100 Continue, 103 Early Hints): not forwarded; the real answer follows.
    if (status < 200) return 1;
    this.keepAlive = keepAlive;
    ex.sink.onHeaders(status, statusText, raw);
    return ex.req.method === "HEAD" ? 1 : 0;
  };

  private readonly onBody = (chunk: Buffer) => {
    const ex = this.current;
    if (ex && !ex.done && !ex.sink.onData(chunk)) this.socket.pause();
  };

  private readonly onMessageComplete = () => {
    const ex = this.current;
    if (!ex || this.status < 200) return;
    const trailers = this.partial;
    this.partial = [];
    if (!ex.done) {
      ex.done = true;
      ex.sink.onComplete(trailers);
    }
    if (this.bodyDone) this.finishExchange();
    else {
      // The upstream answered before the request body was sent: the connection is not reusable.
      this.current = null;
      this.socket.destroy();
    }
  };

  private finishExchange(): void {
    this.current = null;
    if (!this.keepAlive || !this.bodyDone) return void this.socket.destroy();
    // Backpressure was the finished exchange's: the last chunk may have paused the socket, and the
    // next exchange (or the check for unsolicited bytes) must read it.
    this.socket.resume();
    this.socket.setTimeout(IDLE_TIMEOUT_MS);
    // An idle upstream connection does not keep the process alive (undici's behaviour too).
    this.socket.unref();
    this.idle = true;
    this.pool.release(this);
  }

  private readonly onSocketData = (data: Buffer) => {
    if (this.idle && this.current === null) return void this.socket.destroy(); // unsolicited bytes
    const r = this.parser.execute(data);
    if (r instanceof Error) this.fail(Object.assign(r, { code: (r as UpstreamError).code ?? "HPE_INVALID" }));
  };

  private readonly onEnd = () => {
    // A body delimited by the connection's end completes here.
    if (this.current) {
      const r = this.parser.finish();
      if (r instanceof Error) return this.fail(Object.assign(r, { code: (r as UpstreamError).code ?? "HPE_INVALID" }));
    }
    this.socket.destroy();
  };

  private readonly onTimeout = () => {
    if (this.current) this.fail(failure("upstream timed out", "ETIMEDOUT"));
    else this.socket.destroy();
  };

  private readonly onSocketError = (err: UpstreamError) => {
    if (this.current) this.fail(err);
  };

  private readonly onClose = () => {
    if (this.current && !this.current.done) this.fail(failure("upstream closed the connection", "UPSTREAM_CLOSED"));
    this.current = null;
    this.bodyWaiter = null;
    // Emitted after the socket's last read: no parser call is under way.
    this.parser.close();
    this.pool.closed(this);
  };

  private fail(err: UpstreamError): void {
    const ex = this.current;
    this.current = null;
    this.socket.destroy();
    if (ex && !ex.done) {
      ex.done = true;
      ex.sink.onError(err);
    }
  }
}

const reuse = (pool: H1Pool, conn: H1Conn) => pool.reuse(conn);

/** Keep-alive connections to one checked upstream address (of one sandbox: never shared). */
export class H1Pool {
  private readonly idle: H1Conn[] = [];
  private readonly all = new Set<H1Conn>();
  private readonly waiting: Exchange[] = [];
  private closing = false;

  constructor(private readonly origin: Origin) {}

  request(req: H1Request, sink: ResponseSink): Exchange {
    const ex = new Exchange(req, sink, this);
    if (this.closing) {
      ex.done = true;
      sink.onError(failure("connection pool closed", "ERR_POOL_CLOSED"));
      return ex;
    }
    const conn = this.idle.pop();
    if (conn) conn.start(ex);
    else if (this.all.size < MAX_CONNECTIONS) this.connect().start(ex);
    else this.waiting.push(ex);
    return ex;
  }

  private connect(): H1Conn {
    const o = this.origin;
    const socket = o.tls
      ? tls.connect({
          host: o.address,
          port: o.port,
          servername: o.tls.servername,
          secureContext: o.tls.secureContext,
          ALPNProtocols: ["http/1.1"],
        })
      : net.connect({ host: o.address, port: o.port, noDelay: true });
    if (o.tls) socket.setNoDelay(true);
    const conn = new H1Conn(socket, this);
    this.all.add(conn);
    return conn;
  }

  /** A connection finished its exchange: after a turn of the event loop it serves the next one. */
  release(conn: H1Conn): void {
    setImmediate(reuse, this, conn);
  }

  /** @internal (reuse) */
  reuse(conn: H1Conn): void {
    if (conn.socket.destroyed || conn.current) return;
    if (this.closing) return void conn.socket.destroy();
    const next = this.waiting.shift();
    if (next) conn.start(next);
    else this.idle.push(conn);
  }

  closed(conn: H1Conn): void {
    this.all.delete(conn);
    const i = this.idle.indexOf(conn);
    if (i >= 0) this.idle.splice(i, 1);
    const next = this.waiting.shift();
    if (next && !this.closing) this.connect().start(next);
  }

  dequeue(ex: Exchange): void {
    const i = this.waiting.indexOf(ex);
    if (i >= 0) this.waiting.splice(i, 1);
  }

  /** Closes idle connections now and busy ones when their exchange ends. */
  async close(): Promise<void> {
    this.closing = true;
    for (const c of this.idle.splice(0)) c.socket.destroy();
  }

  async destroy(): Promise<void> {
    this.closing = true;
    for (const ex of this.waiting.splice(0)) ex.abort();
    for (const c of this.all) c.socket.destroy();
  }

  get size(): number {
    return this.all.size;
  }
}
