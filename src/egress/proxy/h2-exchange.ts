import type http2 from "node:http2";
import type { Readable } from "node:stream";
import { headerObject, pairs } from "./header-filter.ts";
import { CTX, type ClientReply, type ClientRequest, type ConnContext, type ReplyWatcher, type WithCtx } from "./types.ts";

/** An HTTP/2 request of Node's compatibility layer, as the request path reads requests. */
export class H2Request implements ClientRequest {
  readonly h2 = true;
  readonly method: string;
  readonly url: string;
  readonly rawHeaders: string[];
  readonly ctx: ConnContext | undefined;
  /** HTTP/2 frames bodies itself: a request has one unless its HEADERS frame ended the stream. */
  readonly body: Readable | null;

  constructor(readonly req: http2.Http2ServerRequest) {
    this.method = req.method;
    this.url = req.url;
    this.rawHeaders = req.rawHeaders;
    this.ctx = (req.socket as unknown as WithCtx)[CTX];
    this.body = req.stream.endAfterHeaders ? null : (req as unknown as Readable);
  }

  header(name: string): string | undefined {
    const v = this.req.headers[name];
    return Array.isArray(v) ? v[0] : v;
  }

  discard(): void {
    this.req.resume();
  }
}

/** The answer to an `H2Request`; `res` is Node's, for the HTTP/2 upstream path that streams into it. */
export class H2Reply implements ClientReply {
  constructor(readonly res: http2.Http2ServerResponse) {}

  get headersSent(): boolean {
    return this.res.headersSent;
  }

  get gone(): boolean {
    return this.res.stream.destroyed;
  }

  writeHead(status: number, _statusText: string, headers: string[]): void {
    // The upstream's answer as it came: no Date of Node's own added.
    this.res.sendDate = false;
    this.res.writeHead(status, headerObject(headers));
  }

  write(chunk: Buffer): boolean {
    return this.res.write(chunk);
  }

  addTrailers(trailers: string[]): void {
    this.res.addTrailers(Object.fromEntries(pairs(trailers)));
  }

  end(last?: string): void {
    if (last) this.res.end(last);
    else this.res.end();
  }

  destroy(): void {
    this.res.destroy();
  }

  watch(watcher: ReplyWatcher): void {
    this.res.on("close", () => watcher.clientClosed());
    this.res.on("drain", () => watcher.clientDrained());
  }
}
