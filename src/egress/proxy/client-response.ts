import type http from "node:http";
import { pairs, responseHeaders } from "./header-filter.ts";
import type { Exchange, ResponseSink, UpstreamError } from "./h1-upstream.ts";

/** Has the client already left (its connection or HTTP/2 stream closed)? Then nothing is sent upstream. */
export function clientGone(req: http.IncomingMessage, res: http.ServerResponse): boolean {
  const stream = (res as unknown as { stream?: { destroyed: boolean } }).stream;
  if (stream) return stream.destroyed;
  // Not `res.socket`: a pipelined request's response gets its socket only when its turn comes.
  return res.destroyed || req.socket.destroyed;
}

/**
 * Streams an answer of the HTTP/1.1 upstream client into the client's response, with
 * backpressure: a slow client pauses the upstream socket until its response drains. A client
 * that leaves aborts the exchange (queued or on the wire).
 */
export class ClientResponse<C = unknown> implements ResponseSink {
  exchange: Exchange | null = null;
  private completed = false;

  /** `onFailure` gets `context` back: one shared function, no closure per request. */
  constructor(
    private readonly res: http.ServerResponse,
    private readonly onFailure: (res: http.ServerResponse, err: UpstreamError, context: C) => void,
    private readonly context: C,
  ) {
    res.on("close", this.onClose);
    res.on("drain", this.onDrain);
  }

  private readonly onClose = () => {
    if (!this.completed) this.exchange?.abort();
  };

  private readonly onDrain = () => this.exchange?.resume();

  onHeaders(status: number, statusText: string, raw: string[]): void {
    this.res.sendDate = false;
    this.res.writeHead(status, statusText, responseHeaders(raw) as unknown as http.OutgoingHttpHeaders);
  }

  onData(chunk: Buffer): boolean {
    return this.res.write(chunk);
  }

  onComplete(trailers: string[]): void {
    this.completed = true;
    if (trailers.length) this.res.addTrailers(pairs(trailers));
    this.res.end();
  }

  onError(err: UpstreamError): void {
    this.completed = true;
    this.onFailure(this.res, err, this.context);
  }
}
