import type net from "node:net";
import { Readable } from "node:stream";
import { H1Exchange, hasBody, type ExchangeConnection } from "./h1-exchange.ts";
import { HTTPParser, METHODS, type NativeParser } from "./llhttp.ts";
import { destroySelf } from "../socket-helpers.ts";
import { CTX, type ClientReply, type ClientRequest, type ConnContext, type WithCtx } from "../types.ts";

/*
 * The data plane's HTTP/1.1 server side, hand-written on Node's native llhttp binding like the
 * upstream client (`h1-upstream.ts`).
 *
 * Why not `http.Server`: measured with bench/egress-proxy.ts (wrk, 16 keep-alive connections, same
 * machine, back to back), `http.Server` answering by itself costs ~20 µs of user CPU per request,
 * this front ~10 µs: no IncomingMessage/ServerResponse streams, no header object unless asked for,
 * the head and a small body leave in one write. Parsing is the same strict llhttp Node uses (no
 * lenient flags: CL+TE, obs-fold, bare LF and the like are refused), with its own header-size limit.
 *
 * What it keeps of `http.Server`: keep-alive, pipelined requests answered in order, `Expect:
 * 100-continue`, CONNECT and Upgrade handed over with the bytes after the head, a deadline for a
 * request's head (slowloris) and for idle keep-alive connections, swept on one timer.
 */

export interface FrontHandlers {
  request(req: ClientRequest, res: ClientReply): void;
  /** CONNECT (`connect`) or an Upgrade request (`upgrade`): the socket is the handler's from now on. */
  handOver(kind: "connect" | "upgrade", req: ClientRequest, socket: net.Socket, head: Buffer): void;
  /** Unparseable bytes or a head that took too long; the front answers and closes. */
  rejected(ctx: ConnContext | undefined, reason: string): void;
}

export interface FrontLimits {
  headerTimeoutMs: number;
  idleTimeoutMs: number;
  maxHeaderSize: number;
}

/** Pipelined requests parsed ahead of their turn; past this, the socket stops being read. */
const MAX_QUEUED = 16;

export class H1Front {
  private readonly conns = new Set<H1Connection>();
  private sweeper: NodeJS.Timeout | null = null;

  constructor(
    readonly handlers: FrontHandlers,
    readonly limits: FrontLimits,
  ) {}

  /** Serves HTTP/1.1 on a connection whose `ConnContext` is already attached. */
  accept(socket: net.Socket): void {
    const conn = new H1Connection(this, socket);
    this.conns.add(conn);
    if (!this.sweeper) {
      // Checked every second at most (Node's own check runs every 30 s by default).
      const every = Math.min(1_000, Math.max(100, this.limits.headerTimeoutMs >> 1));
      this.sweeper = setInterval(() => this.sweep(), every);
      this.sweeper.unref();
    }
  }

  /** @internal */
  forget(conn: H1Connection): void {
    this.conns.delete(conn);
    if (this.conns.size === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  private sweep(): void {
    const now = Date.now();
    for (const c of this.conns) c.checkDeadlines(now);
  }

  closeAll(): void {
    for (const c of this.conns) c.socket.destroy();
  }
}

class H1Connection implements ExchangeConnection {
  private parser: NativeParser | null = null;
  /** The exchange being answered; later pipelined ones wait in `queue`. */
  private active: H1Exchange | null = null;
  private readonly queue: H1Exchange[] = [];
  /** The exchange whose request is being read (its body, if any, still arriving). */
  private reading: H1Exchange | null = null;
  private partialHeaders: string[] = [];
  private partialUrl = "";
  /**
   * When the head being read began (0: none is). A new connection counts as one from its start, as
   * in Node: its first request's head must be complete within the header timeout.
   */
  private headStart = Date.now();
  private lastActive = Date.now();
  /** A CONNECT or Upgrade head was read: the rest of the bytes are the handler's. */
  private handOver: H1Exchange | null = null;
  /** Stop reading requests: the client half-closed or the connection ends after the active answer. */
  private closing = false;
  private paused = false;

  constructor(
    private readonly front: H1Front,
    readonly socket: net.Socket,
  ) {
    // A client that half-closes after its request still gets its answer.
    socket.allowHalfOpen = true;
    (socket as Owned<net.Socket>)[OWNER] = this;
    socket.on("data", socketData);
    socket.on("end", socketEnd);
    socket.on("drain", socketDrain);
    socket.on("close", socketClose);
    // A reset from the client is routine: the close handler cleans up.
    if (!socket.listenerCount("error")) socket.on("error", destroySelf);
  }

  private createParser(): NativeParser {
    const p = new HTTPParser();
    p.initialize(HTTPParser.REQUEST, {}, this.front.limits.maxHeaderSize, 0);
    (p as Owned<NativeParser>)[OWNER] = this;
    p[HTTPParser.kOnMessageBegin] = parserMessageBegin;
    p[HTTPParser.kOnHeaders] = parserHeaders;
    p[HTTPParser.kOnHeadersComplete] = parserHeadersComplete;
    p[HTTPParser.kOnBody] = parserBody;
    p[HTTPParser.kOnMessageComplete] = parserMessageComplete;
    return p;
  }

  /** @internal (socket listener) */
  onData(data: Buffer): void {
    // The parser is made on the first bytes: an idle connection costs none.
    const parser = (this.parser ??= this.createParser());
    const r = parser.execute(data);
    if (typeof r !== "number")
      return this.malformed(
        r.code === "HPE_HEADER_OVERFLOW" ? 431 : 400,
        `malformed HTTP from the sandbox (${r.code ?? "parse error"})`,
      );
    const over = this.handOver;
    if (over) {
      this.handOver = null;
      if (this.active !== null) return this.malformed(400, "CONNECT or Upgrade pipelined behind another request");
      this.detach(true);
      const kind = over.method === "CONNECT" ? "connect" : "upgrade";
      this.front.handlers.handOver(kind, over, this.socket, data.subarray(r));
    }
  }

  /** @internal (parser callback) */
  onMessageBegin(): void {
    this.headStart = Date.now();
  }

  /** @internal (parser callback) */
  onHeaders(headers: string[], url: string): void {
    for (let i = 0; i < headers.length; i++) this.partialHeaders.push(headers[i]);
    this.partialUrl += url;
  }

  /** @internal (parser callback) */
  onHeadersComplete(
    minor: number,
    headers: string[] | undefined,
    method: number,
    url: string | undefined,
    upgrade: boolean,
    keepAlive: boolean,
  ): number {
    this.headStart = 0;
    // Heads read in one piece (the usual case) come whole here: no array is made for them.
    let raw = headers;
    if (raw === undefined || this.partialHeaders.length) {
      raw = headers ? this.partialHeaders.concat(headers) : this.partialHeaders;
      this.partialHeaders = [];
    }
    const target = url ?? this.partialUrl;
    this.partialUrl = "";
    const ex = new H1Exchange(this, METHODS[method] ?? "UNKNOWN", target, raw, minor, keepAlive);
    if (upgrade) {
      // CONNECT, or Upgrade with `Connection: upgrade`: the head is all this front reads.
      this.handOver = ex;
      return 2;
    }
    if (hasBody(raw)) {
      ex.body = new Readable({ read: () => this.resumeReading() });
      ex.body.on("error", () => undefined); // the upstream client reports a body that failed
    }
    this.reading = ex;
    if (this.active === null) this.start(ex);
    else {
      this.queue.push(ex);
      if (this.queue.length >= MAX_QUEUED) this.pauseReading();
    }
    return 0;
  }

  /** @internal (parser callback) */
  onBody(chunk: Buffer): void {
    const ex = this.reading;
    if (!ex || ex.discarding || !ex.body) return;
    if (!ex.body.push(chunk)) this.pauseReading();
  }

  /** @internal (parser callback) */
  onMessageComplete(): void {
    // A chunked request's trailers arrive through onHeaders just before this, with the request's
    // URL again: they are not forwarded (the upstream client sends none) and must not become part
    // of the next request's head or target.
    if (this.partialHeaders.length) this.partialHeaders = [];
    this.partialUrl = "";
    const ex = this.reading;
    this.reading = null;
    if (!ex) return;
    ex.requestDone = true;
    ex.body?.push(null);
    if (ex.answered) this.next();
  }

  private start(ex: H1Exchange): void {
    this.active = ex;
    const expect = ex.header("expect");
    if (expect !== undefined) {
      if (ex.versionMinor >= 1 && expect.trim().toLowerCase() === "100-continue")
        this.socket.write("HTTP/1.1 100 Continue\r\n\r\n", "latin1");
      else {
        ex.discard();
        ex.keepAlive = false;
        ex.reply.writeHead(417, "Expectation Failed", ["content-length", "0"]);
        return ex.reply.end();
      }
    }
    this.front.handlers.request(ex, ex.reply);
  }

  /** @internal (H1Exchange) */
  replied(ex: H1Exchange): void {
    if (ex !== this.active) return;
    this.lastActive = Date.now();
    if (!ex.keepAlive) {
      this.closing = true;
      this.queue.length = 0;
      this.detach(false);
      return void this.socket.end();
    }
    // Answered before its body was read: the rest is read and dropped, then the next request.
    if (!ex.requestDone) return void ex.discard();
    this.next();
  }

  /** The active exchange is done both ways: on to the next pipelined request, if any. */
  private next(): void {
    this.active = null;
    const ex = this.queue.shift();
    if (this.paused && this.queue.length < MAX_QUEUED) this.resumeReading();
    if (ex) this.start(ex);
    else if (this.closing) this.socket.end();
  }

  /** @internal (request bodies) */
  resumeReading(): void {
    if (!this.paused) return;
    this.paused = false;
    this.socket.resume();
  }

  private pauseReading(): void {
    if (this.paused) return;
    this.paused = true;
    this.socket.pause();
  }

  private malformed(status: 400 | 408 | 431, reason: string): void {
    this.front.handlers.rejected((this.socket as WithCtx)[CTX], reason);
    this.closing = true;
    this.detach(false);
    // An answer on the wire is cut; otherwise the client reads why.
    if (this.active && this.active.reply.headersSent) return void this.socket.destroy();
    const text =
      status === 400 ? "Bad Request" : status === 408 ? "Request Timeout" : "Request Header Fields Too Large";
    if (this.socket.writable)
      this.socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`, "latin1");
    else this.socket.destroy();
  }

  /** @internal (socket listener) */
  onEnd(): void {
    const r = this.parser?.finish();
    if (r !== undefined && typeof r !== "number") return void this.socket.destroy();
    this.closing = true;
    // Half-closed after its requests: they are still answered, then the connection ends.
    if (this.active === null) this.socket.end();
  }

  /** @internal (socket listener) */
  onDrain(): void {
    this.active?.watcher?.clientDrained();
  }

  /** @internal (socket listener) */
  onClose(): void {
    this.front.forget(this);
    this.releaseParser();
    const ex = this.active;
    this.active = null;
    this.queue.length = 0;
    if (this.reading?.body && !this.reading.requestDone)
      this.reading.body.destroy(new Error("client closed the connection"));
    this.reading = null;
    if (ex && !ex.answered) ex.watcher?.clientClosed();
  }

  /** Stops reading HTTP from the socket: it is closing, or `handingOver` to another handler. */
  private detach(handingOver: boolean): void {
    this.socket.off("data", socketData);
    this.socket.off("end", socketEnd);
    this.socket.off("drain", socketDrain);
    this.front.forget(this);
    if (!handingOver) return;
    // The handler reads the socket from here (paused until it does); nothing of HTTP stays with it.
    this.socket.off("close", socketClose);
    this.socket.pause();
    this.releaseParser();
    (this.socket as Partial<Owned<net.Socket>>)[OWNER] = undefined;
  }

  /** Called between reads (a socket event, after `execute` returned), never from a parser callback. */
  private releaseParser(): void {
    this.parser?.close();
    this.parser = null;
  }

  /** @internal (the front's sweep) */
  checkDeadlines(now: number): void {
    const limits = this.front.limits;
    if (this.headStart !== 0 && now - this.headStart > limits.headerTimeoutMs) {
      // A connection that never sent a byte is closed quietly (a client's unused spare).
      if (this.parser === null) return void this.socket.destroy();
      return this.malformed(408, `request head not complete within ${limits.headerTimeoutMs} ms`);
    }
    if (
      this.active === null &&
      this.headStart === 0 &&
      this.reading === null &&
      now - this.lastActive > limits.idleTimeoutMs
    )
      this.socket.destroy();
  }
}

/*
 * Listeners and parser callbacks shared by every connection: Node calls a socket's listeners with
 * the socket as `this` and the parser's callbacks with the parser as `this`, so the connection
 * rides on both and no connection makes closures of its own (an idle intercepted connection costs
 * less memory, a new one less work).
 */
const OWNER = Symbol("h1-connection");
type Owned<T> = T & { [OWNER]: H1Connection };

function socketData(this: Owned<net.Socket>, data: Buffer): void {
  this[OWNER].onData(data);
}
function socketEnd(this: Owned<net.Socket>): void {
  this[OWNER].onEnd();
}
function socketDrain(this: Owned<net.Socket>): void {
  this[OWNER].onDrain();
}
function socketClose(this: Owned<net.Socket>): void {
  this[OWNER].onClose();
}
function parserMessageBegin(this: Owned<NativeParser>): number {
  this[OWNER].onMessageBegin();
  return 0;
}
function parserHeaders(this: Owned<NativeParser>, headers: string[], url: string): void {
  this[OWNER].onHeaders(headers, url);
}
function parserHeadersComplete(
  this: Owned<NativeParser>,
  _major: number,
  minor: number,
  headers: string[] | undefined,
  method: number,
  url: string | undefined,
  _status: unknown,
  _text: unknown,
  upgrade: boolean,
  keepAlive: boolean,
): number {
  return this[OWNER].onHeadersComplete(minor, headers, method, url, upgrade, keepAlive);
}
function parserBody(this: Owned<NativeParser>, chunk: Buffer): void {
  this[OWNER].onBody(chunk);
}
function parserMessageComplete(this: Owned<NativeParser>): void {
  this[OWNER].onMessageComplete();
}
