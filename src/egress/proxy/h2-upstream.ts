import http2 from "node:http2";
import tls from "node:tls";
import {
  ACTIVE_TIMEOUT_MS,
  CONNECT_TIMEOUT_MS,
  failure,
  H1Pool,
  IDLE_TIMEOUT_MS,
  TOKEN,
  type H1Request,
  type Origin,
  type ResponseSink,
  type UpstreamError,
  type UpstreamExchange,
} from "./http1/h1-upstream.ts";

/*
 * The upstream client for requests that came in over HTTP/2: one origin, offered `h2` and
 * `http/1.1` by ALPN. An origin that speaks HTTP/2 gets multiplexed sessions of Node's own
 * `http2` client; one that answers `http/1.1` is served by the HTTP/1.1 client from then on.
 *
 * Why not undici's HTTP/2 (what this replaced): measured on a 2-core machine with h2load (16
 * connections, one stream each), a minimal proxy of Node's HTTP/2 server and undici's HTTP/2 pool
 * spends ~171 µs of CPU per request, the same proxy with Node's `ClientHttp2Session` ~105 µs:
 * undici builds its request objects and handler chain per request on top of the same session.
 */

/** Streams per session before a second one is opened (the upstream's own limit, when lower, wins). */
const STREAMS_PER_SESSION = 100;
const MAX_SESSIONS = 16;
/** Response headers the client's protocol carries itself. */
const PSEUDO = 58; // ':'

interface Session {
  session: http2.ClientHttp2Session;
  active: number;
  usable: boolean;
}

interface Waiting {
  req: H1Request;
  sink: ResponseSink;
  ex: H2Exchange;
}

/** One request on an HTTP/2 session (or, for an HTTP/1.1 origin, on the HTTP/1.1 client). */
class H2Exchange implements UpstreamExchange {
  stream: http2.ClientHttp2Stream | null = null;
  inner: UpstreamExchange | null = null;
  aborted = false;

  abort(): void {
    if (this.aborted) return;
    this.aborted = true;
    this.inner?.abort();
    if (this.stream && !this.stream.closed) this.stream.close(http2.constants.NGHTTP2_CANCEL);
  }

  resume(): void {
    this.inner?.resume();
    this.stream?.resume();
  }
}

/** Keep-alive HTTP/2 sessions to one checked upstream address (of one sandbox: never shared). */
export class H2Origin {
  private protocol: "unknown" | "h2" | "http/1.1" = "unknown";
  private readonly sessions: Session[] = [];
  private connecting = false;
  private waiting: Waiting[] = [];
  private h1: H1Pool | null = null;
  private closing = false;

  constructor(private readonly origin: Origin & { tls: NonNullable<Origin["tls"]> }) {}

  request(req: H1Request, sink: ResponseSink): UpstreamExchange {
    const ex = new H2Exchange();
    if (this.closing) {
      sink.onError(failure("connection pool closed", "ERR_POOL_CLOSED"));
      return ex;
    }
    if (this.protocol === "http/1.1") {
      ex.inner = this.http1().request(req, sink);
      return ex;
    }
    const s = this.available();
    if (s) this.start(s, req, sink, ex);
    else {
      this.waiting.push({ req, sink, ex });
      if (!this.connecting && this.sessions.length < MAX_SESSIONS) this.connect();
    }
    return ex;
  }

  private available(): Session | null {
    for (const s of this.sessions) {
      const limit = Math.min(
        STREAMS_PER_SESSION,
        s.session.remoteSettings?.maxConcurrentStreams ?? STREAMS_PER_SESSION,
      );
      if (s.usable && s.active < limit) return s;
    }
    return null;
  }

  private http1(): H1Pool {
    return (this.h1 ??= new H1Pool(this.origin));
  }

  private connect(): void {
    this.connecting = true;
    const o = this.origin;
    const socket = tls.connect({
      host: o.address,
      port: o.port,
      servername: o.tls.servername,
      secureContext: o.tls.secureContext,
      ALPNProtocols: ["h2", "http/1.1"],
    });
    socket.setNoDelay(true);
    socket.setTimeout(CONNECT_TIMEOUT_MS, () => socket.destroy(failure("upstream connect timed out", "ETIMEDOUT")));
    let settled = false;
    const failed = (err: UpstreamError) => {
      if (settled) return;
      settled = true;
      this.connecting = false;
      // Only requests no session can take fail with this connection; a later one tries again.
      for (const w of this.waiting.splice(0)) if (!w.ex.aborted) w.sink.onError(err);
    };
    socket.on("error", failed);
    socket.once("secureConnect", () => {
      settled = true;
      socket.off("error", failed);
      socket.setTimeout(0);
      if (socket.alpnProtocol !== "h2") {
        // An HTTP/1.1-only origin: its own client from now on (this socket was negotiated for both).
        this.connecting = false;
        this.protocol = "http/1.1";
        socket.destroy();
        for (const w of this.waiting.splice(0)) if (!w.ex.aborted) w.ex.inner = this.http1().request(w.req, w.sink);
        return;
      }
      this.protocol = "h2";
      this.adopt(socket);
    });
  }

  private adopt(socket: tls.TLSSocket): void {
    const session = http2.connect(`https://${this.origin.tls.servername ?? "upstream"}`, {
      createConnection: () => socket,
      settings: { enablePush: false },
    });
    const s: Session = { session, active: 0, usable: true };
    this.sessions.push(s);
    this.connecting = false;
    session.setTimeout(IDLE_TIMEOUT_MS, () => {
      if (s.active === 0) session.close();
    });
    // A session with no stream does not keep the process alive (as with idle HTTP/1.1 sockets).
    session.unref();
    const gone = () => {
      s.usable = false;
      const i = this.sessions.indexOf(s);
      if (i >= 0) this.sessions.splice(i, 1);
      this.drain();
    };
    session.on("goaway", () => (s.usable = false));
    // Each stream reports its own failure; the session's error is the same one.
    session.on("error", () => gone());
    session.once("close", gone);
    this.drain();
  }

  /** Starts what waits on sessions with room; opens another session for the rest. */
  private drain(): void {
    while (this.waiting.length) {
      const w = this.waiting[0];
      if (w.ex.aborted) {
        this.waiting.shift();
        continue;
      }
      const s = this.available();
      if (!s) break;
      this.waiting.shift();
      this.start(s, w.req, w.sink, w.ex);
    }
    if (this.waiting.length && !this.connecting && !this.closing && this.sessions.length < MAX_SESSIONS) this.connect();
  }

  private start(s: Session, req: H1Request, sink: ResponseSink, ex: H2Exchange): void {
    let stream: http2.ClientHttp2Stream;
    try {
      stream = s.session.request(requestHeaders(req), { endStream: req.body === null });
    } catch (err) {
      // A header HTTP/2 cannot carry, or a session that just closed.
      return sink.onError(
        Object.assign(err as UpstreamError, { code: (err as UpstreamError).code ?? "ERR_HTTP2_REQUEST" }),
      );
    }
    s.active++;
    s.session.ref();
    ex.stream = stream;
    new StreamToSink(stream, sink, ex, () => {
      s.active--;
      if (s.active === 0) s.session.unref();
      this.drain();
    });
    const body = req.body;
    if (body) {
      body.on("error", () => ex.abort());
      body.pipe(stream);
    }
  }

  /** Closes idle sessions now and busy ones when their streams end. */
  async close(): Promise<void> {
    this.closing = true;
    for (const s of this.sessions) s.session.close();
    await this.h1?.close();
  }

  async destroy(): Promise<void> {
    this.closing = true;
    for (const w of this.waiting.splice(0)) w.ex.aborted = true;
    for (const s of [...this.sessions]) s.session.destroy();
    await this.h1?.destroy();
  }
}

/** Feeds one upstream stream's answer to the sink, in order, once: headers, data, trailers, end or error. */
class StreamToSink {
  private trailers: string[] = [];
  private answered = false;
  private completed = false;
  private error: UpstreamError | null = null;

  constructor(
    private readonly stream: http2.ClientHttp2Stream,
    private readonly sink: ResponseSink,
    private readonly ex: H2Exchange,
    private readonly closed: () => void,
  ) {
    stream.on("response", this.onResponse);
    stream.on("trailers", this.onTrailers);
    stream.on("end", this.onEnd);
    stream.on("error", this.onError);
    stream.on("close", this.onClose);
    stream.setTimeout(ACTIVE_TIMEOUT_MS, this.onTimeout);
  }

  private readonly onTimeout = () => {
    this.error ??= failure("upstream timed out", "ETIMEDOUT");
    this.stream.close(http2.constants.NGHTTP2_CANCEL);
  };

  private readonly onResponse = (headers: http2.IncomingHttpHeaders & http2.IncomingHttpStatusHeader) => {
    if (this.ex.aborted) return;
    this.answered = true;
    this.sink.onHeaders(Number(headers[":status"]), "", flatHeaders(headers));
    // Read only now: Node emits 'response' a tick after the HEADERS frame, and a stream already
    // flowing would hand over the DATA that came with it first.
    this.stream.on("data", this.onData);
  };

  private readonly onData = (chunk: Buffer) => {
    if (this.ex.aborted) return;
    if (!this.sink.onData(chunk)) this.stream.pause();
  };

  private readonly onTrailers = (headers: http2.IncomingHttpHeaders) => {
    this.trailers = flatHeaders(headers);
  };

  private readonly onEnd = () => {
    if (this.ex.aborted || this.completed || !this.answered) return;
    this.completed = true;
    this.sink.onComplete(this.trailers);
  };

  private readonly onError = (err: UpstreamError) => {
    this.error = err;
  };

  private readonly onClose = () => {
    this.closed();
    if (this.ex.aborted || this.completed) return;
    this.completed = true;
    const code = this.stream.rstCode;
    this.sink.onError(
      this.error ??
        failure(
          code ? `upstream reset the stream (code ${code})` : "upstream closed the stream",
          code ? "ERR_HTTP2_STREAM_RESET" : "UPSTREAM_CLOSED",
        ),
    );
  };
}

/**
 * The request's flat headers as HTTP/2 headers: `Host` becomes `:authority`. Throws on a name that
 * is no token: Node's client would not refuse that request alone but destroy the whole session,
 * and every other stream on it (an engine or callback may hand over any name).
 */
function requestHeaders(req: H1Request): http2.OutgoingHttpHeaders {
  const out: http2.OutgoingHttpHeaders = { ":method": req.method, ":path": req.target, ":scheme": "https" };
  const h = req.headers;
  for (let i = 0; i < h.length; i += 2) {
    if (!TOKEN.test(h[i])) throw failure(`invalid header ${JSON.stringify(h[i].slice(0, 64))}`, "ERR_INVALID_HEADER");
    const name = h[i].toLowerCase();
    if (name === "host") {
      out[":authority"] = h[i + 1];
      continue;
    }
    const prev = out[name];
    out[name] = prev === undefined ? h[i + 1] : Array.isArray(prev) ? [...prev, h[i + 1]] : [String(prev), h[i + 1]];
  }
  return out;
}

/** An HTTP/2 header object as flat name/value pairs, pseudo-headers left out. */
function flatHeaders(headers: http2.IncomingHttpHeaders): string[] {
  const out: string[] = [];
  for (const name of Object.keys(headers)) {
    if (name.charCodeAt(0) === PSEUDO) continue;
    const v = headers[name];
    if (Array.isArray(v)) for (const x of v) out.push(name, x);
    else if (v !== undefined) out.push(name, String(v));
  }
  return out;
}
