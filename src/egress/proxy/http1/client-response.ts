import { responseHeaders } from "../header-filter.ts";
import type { ResponseSink, UpstreamError, UpstreamExchange } from "./h1-upstream.ts";
import type { ClientReply, ReplyWatcher } from "../types.ts";

/**
 * Streams an answer of the HTTP/1.1 upstream client into the client's reply, with backpressure: a
 * slow client pauses the upstream socket until its reply drains. A client that leaves aborts the
 * exchange (queued or on the wire). Called from the upstream parser's callbacks, so nothing here
 * may throw: a reply that cannot be written is cut instead.
 */
export class ClientResponse<C = unknown> implements ResponseSink, ReplyWatcher {
  exchange: UpstreamExchange | null = null;
  private completed = false;

  /** `onFailure` gets `context` back: one shared function, no closure per request. */
  constructor(
    private readonly res: ClientReply,
    private readonly onFailure: (res: ClientReply, err: UpstreamError, context: C) => void,
    private readonly context: C,
  ) {
    res.watch(this);
  }

  clientClosed(): void {
    if (!this.completed) this.exchange?.abort();
  }

  clientDrained(): void {
    this.exchange?.resume();
  }

  onHeaders(status: number, statusText: string, raw: string[]): void {
    try {
      this.res.writeHead(status, statusText, responseHeaders(raw));
    } catch {
      // An answer the client's protocol cannot carry (a header HTTP/2 refuses): cut, not crashed.
      this.cut();
    }
  }

  onData(chunk: Buffer): boolean {
    return this.res.write(chunk);
  }

  onComplete(trailers: string[]): void {
    this.completed = true;
    try {
      if (trailers.length) this.res.addTrailers(trailers);
      this.res.end();
    } catch {
      // As in onHeaders: trailers the client's protocol refuses end the reply abruptly.
      this.res.destroy();
    }
  }

  onError(err: UpstreamError): void {
    this.completed = true;
    this.onFailure(this.res, err, this.context);
  }

  private cut(): void {
    this.completed = true;
    this.exchange?.abort();
    this.res.destroy();
  }
}
