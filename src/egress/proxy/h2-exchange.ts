import http2 from "node:http2";
import type { Readable } from "node:stream";
import { headerObject, pairs } from "./header-filter.ts";
import {
  CTX,
  type ClientReply,
  type ClientRequest,
  type ConnContext,
  type ReplyWatcher,
  type WithCtx,
} from "./types.ts";

/*
 * HTTP/2 requests from the sandbox on Node's server streams, not its compatibility layer
 * (`Http2ServerRequest`/`Http2ServerResponse`): measured with h2load (16 connections, one stream
 * each), a minimal proxy on the compatibility layer spent ~130 µs of CPU per request, the same on
 * raw streams ~105 µs. What the layer did that matters here is done below: no Date of Node's own,
 * `100 Continue` for a body that waits for it, trailers after the body (every answer may have them:
 * gRPC's status lives there), a HEAD answer without a body.
 */

const { HTTP2_HEADER_STATUS, HTTP2_HEADER_METHOD, HTTP2_HEADER_PATH, HTTP2_HEADER_AUTHORITY } = http2.constants;

/** An HTTP/2 request stream, as the request path reads requests. */
export class H2Request implements ClientRequest {
  readonly h2 = true;
  readonly method: string;
  readonly url: string;
  readonly ctx: ConnContext | undefined;
  /** HTTP/2 frames bodies itself: a request has one unless its HEADERS frame ended the stream. */
  readonly body: Readable | null;

  constructor(
    readonly stream: http2.ServerHttp2Stream,
    private readonly headers: http2.IncomingHttpHeaders,
    readonly rawHeaders: string[],
  ) {
    this.method = String(headers[HTTP2_HEADER_METHOD]);
    // CONNECT names an authority, not a path (what the compatibility layer read as its URL).
    this.url = String(headers[HTTP2_HEADER_PATH] ?? headers[HTTP2_HEADER_AUTHORITY] ?? "");
    this.ctx = (stream.session?.socket as unknown as WithCtx | undefined)?.[CTX];
    this.body = stream.endAfterHeaders ? null : stream;
    // The body is read as it comes (what the compatibility layer answered for it, and the HTTP/1.1 front does).
    if (this.body && !stream.closed && /^100-continue$/i.test(String(headers.expect ?? "")))
      stream.additionalHeaders({ [HTTP2_HEADER_STATUS]: 100 });
  }

  header(name: string): string | undefined {
    const v = this.headers[name];
    return Array.isArray(v) ? v[0] : v;
  }

  discard(): void {
    this.stream.resume();
  }
}

/** The answer to an `H2Request`, on the same stream. */
export class H2Reply implements ClientReply {
  private trailers: http2.OutgoingHttpHeaders = {};
  private readonly head: boolean;

  constructor(
    private readonly stream: http2.ServerHttp2Stream,
    method: string,
  ) {
    this.head = method === "HEAD";
  }

  get headersSent(): boolean {
    return this.stream.headersSent;
  }

  get gone(): boolean {
    return this.stream.destroyed;
  }

  writeHead(status: number, _statusText: string, headers: string[]): void {
    // The client reset the stream meanwhile: nothing to answer (as the compatibility layer did).
    if (this.stream.destroyed || this.stream.closed) return;
    const out = headerObject(headers);
    out[HTTP2_HEADER_STATUS] = status;
    // Trailers come with the end of the body, whenever the upstream sends them; a HEAD answer ends here.
    this.stream.respond(out, {
      endStream: this.head,
      waitForTrailers: !this.head,
      sendDate: false,
    } as http2.ServerStreamResponseOptions);
    if (!this.head) this.stream.once("wantTrailers", this.sendTrailers);
  }

  private readonly sendTrailers = () => {
    if (this.stream.destroyed) return;
    try {
      // An empty set ends the stream with an empty DATA frame (what Node does for none).
      this.stream.sendTrailers(this.trailers);
    } catch {
      // Trailers HTTP/2 cannot carry (a connection-specific field): the answer ends abruptly.
      this.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    }
  };

  write(chunk: Buffer): boolean {
    return this.head ? true : this.stream.write(chunk);
  }

  addTrailers(trailers: string[]): void {
    this.trailers = Object.fromEntries(pairs(trailers));
  }

  end(last?: string): void {
    if (this.stream.destroyed || this.stream.closed) return;
    if (!this.stream.headersSent) {
      // An answer made here: the whole body is known.
      this.stream.respond({ [HTTP2_HEADER_STATUS]: 200 }, {
        endStream: this.head || !last,
        sendDate: false,
      } as http2.ServerStreamResponseOptions);
      if (this.head || !last) return;
    }
    if (this.head) return;
    if (last) this.stream.end(last);
    else this.stream.end();
  }

  destroy(): void {
    this.stream.destroy();
  }

  watch(watcher: ReplyWatcher): void {
    this.stream.on("close", () => watcher.clientClosed());
    this.stream.on("drain", () => watcher.clientDrained());
  }
}
