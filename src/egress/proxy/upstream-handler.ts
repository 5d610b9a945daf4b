import type http from "node:http";
import type http2 from "node:http2";
import { pairs, headerObject, responseHeaders } from "./header-filter.ts";

/**
 * undici 7's HTTP/1.1 parser asserts `!this.paused` when a response that closes its connection
 * (`Connection: close`, or a body delimited by the close) ends while the parser is paused by
 * backpressure: an uncatchable AssertionError from the socket's `end` handler (nodejs/undici#5360,
 * fixed in undici 8, which needs Node 22). For such responses the handler never pauses the parser
 * and lets the client's response buffer instead, up to this much; past it the request is aborted.
 */
export const CLOSE_DELIMITED_BUFFER_LIMIT = 64 * 1024 * 1024;

/** Does this response end its connection (where undici 7 must not be paused)? */
export function endsConnection(raw: string[]): boolean {
  let length = false;
  let chunked = false;
  for (let i = 0; i < raw.length; i += 2) {
    const name = raw[i].toLowerCase();
    if (name === "connection" && /(^|,)\s*close\s*(,|$)/i.test(raw[i + 1])) return true;
    if (name === "content-length") length = true;
    if (name === "transfer-encoding" && /chunked\s*$/i.test(raw[i + 1])) chunked = true;
  }
  return !length && !chunked;
}

/**
 * Streams one upstream answer into an HTTP/2 client's response (undici's dispatch handler), with
 * backpressure: when the client is slow, undici is paused until the response drains. A class, not
 * closures: this runs for every request.
 */
export class UpstreamHandler {
  private abortFn: ((err?: Error) => void) | null = null;
  /**
   * The client left (its response closed) before the answer completed: abort upstream, also when it
   * left before undici started the request. Not `res.writableFinished`: an HTTP/2 stream the client
   * reset reads as finished.
   */
  private clientClosed = false;
  private completed = false;
  private resumeFn: (() => void) | null = null;
  /** The response ends its upstream connection: never pause undici (see `endsConnection`). */
  private noPause = false;

  constructor(
    private readonly res: http2.Http2ServerResponse,
    private readonly onFailure: (err: Error & { code?: string }) => void,
  ) {
    res.on("close", this.onClose);
    res.on("drain", this.onDrain);
  }

  private readonly onClose = () => {
    this.clientClosed = true;
    if (!this.completed) this.abortFn?.(new Error("client went away"));
  };

  private readonly onDrain = () => this.resumeFn?.();

  onConnect(abort: (err?: Error) => void): void {
    this.abortFn = abort;
    if (this.clientClosed) abort(new Error("client went away"));
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void): boolean {
    this.resumeFn = resume;
    const raw: string[] = new Array(rawHeaders.length);
    for (let i = 0; i < rawHeaders.length; i++) raw[i] = rawHeaders[i].toString("latin1");
    this.res.sendDate = false;
    // An HTTP/2 answer has neither header; only an explicit close is evidence of an HTTP/1.1 upstream.
    this.noPause = raw.some((v, i) => i % 2 === 0 && v.toLowerCase() === "connection") && endsConnection(raw);
    this.res.writeHead(statusCode, headerObject(responseHeaders(raw)));
    return true;
  }

  onData(chunk: Buffer): boolean {
    const ok = this.res.write(chunk);
    if (!this.noPause) return ok;
    if (this.res.writableLength > CLOSE_DELIMITED_BUFFER_LIMIT) this.abortFn?.(new Error("client too slow for a close-delimited response"));
    return true;
  }

  /** Trailers arrive as raw pairs over HTTP/1.1 and as an object over HTTP/2 (gRPC's status lives there). */
  onComplete(trailers: Buffer[] | Record<string, string | string[]> | null): void {
    this.completed = true;
    if (Array.isArray(trailers)) {
      if (trailers.length) this.res.addTrailers(Object.fromEntries(pairs(trailers.map((b) => b.toString("latin1")))));
    } else if (trailers && Object.keys(trailers).length) {
      this.res.addTrailers(trailers as http.OutgoingHttpHeaders);
    }
    this.res.end();
  }

  onError(err: Error & { code?: string }): void {
    this.onFailure(err);
  }
}
