import type http from "node:http";
import { pairs, headerObject, responseHeaders } from "./header-filter.ts";

/**
 * Streams one upstream answer into the client's response (undici's dispatch handler), with
 * backpressure: when the client is slow, undici is paused until the response drains. A class, not
 * closures: this runs for every request.
 */
export class UpstreamHandler {
  private abortFn: ((err?: Error) => void) | null = null;
  private resumeFn: (() => void) | null = null;

  constructor(
    private readonly res: http.ServerResponse,
    private readonly onFailure: (err: Error & { code?: string }) => void,
  ) {
    res.on("close", this.onClose);
    res.on("drain", this.onDrain);
  }

  private readonly onClose = () => {
    if (!this.res.writableFinished) this.abortFn?.(new Error("client went away"));
  };

  private readonly onDrain = () => this.resumeFn?.();

  onConnect(abort: (err?: Error) => void): void {
    this.abortFn = abort;
  }

  onHeaders(statusCode: number, rawHeaders: Buffer[], resume: () => void, statusText: string): boolean {
    this.resumeFn = resume;
    const raw: string[] = new Array(rawHeaders.length);
    for (let i = 0; i < rawHeaders.length; i++) raw[i] = rawHeaders[i].toString("latin1");
    this.res.sendDate = false;
    if ("stream" in this.res) this.res.writeHead(statusCode, headerObject(responseHeaders(raw)));
    else this.res.writeHead(statusCode, statusText, responseHeaders(raw) as unknown as http.OutgoingHttpHeaders);
    return true;
  }

  onData(chunk: Buffer): boolean {
    return this.res.write(chunk);
  }

  /** Trailers arrive as raw pairs over HTTP/1.1 and as an object over HTTP/2 (gRPC's status lives there). */
  onComplete(trailers: Buffer[] | Record<string, string | string[]> | null): void {
    if (Array.isArray(trailers)) {
      if (trailers.length) this.res.addTrailers(pairs(trailers.map((b) => b.toString("latin1"))));
    } else if (trailers && Object.keys(trailers).length) {
      this.res.addTrailers(trailers as http.OutgoingHttpHeaders);
    }
    this.res.end();
  }

  onError(err: Error & { code?: string }): void {
    this.onFailure(err);
  }
}

