import type net from "node:net";
import type { ClientReply, ReplyWatcher } from "../types.ts";

/** What a reply needs of its exchange and connection (`h1-front.ts`). */
export interface ReplyOwner {
  readonly socket: net.Socket;
  /** The request's method (a HEAD answer has no body) and HTTP/1.x minor version. */
  readonly method: string;
  readonly versionMinor: number;
  /** Can the connection carry another request after this answer (as far as the request goes)? */
  keepAlive: boolean;
  watcher: ReplyWatcher | null;
  /** The answer is complete on the wire (or cut): the connection moves on. */
  replied(): void;
}

/** Below this, a pending head and the first body chunk go out as one string: one write, one segment. */
const COALESCE_LIMIT = 16 * 1024;

/**
 * The answer to one HTTP/1.1 request, written straight to the client socket. The head is held
 * until the first body bytes or the end, so a small answer leaves in one write. Framing is ours:
 * a Content-Length from the upstream is kept (llhttp checked the body against it), otherwise the
 * body is chunked to an HTTP/1.1 client and delimited by the close for an HTTP/1.0 one.
 */
export class H1Reply implements ClientReply {
  headersSent = false;
  private finished = false;
  private head: string | null = null;
  private chunked = false;
  private noBody = false;
  private trailers: string[] | null = null;

  constructor(private readonly owner: ReplyOwner) {}

  get gone(): boolean {
    return this.owner.socket.destroyed;
  }

  writeHead(status: number, statusText: string, headers: string[]): void {
    if (this.headersSent) throw new Error("headers already sent");
    const o = this.owner;
    let head = `HTTP/1.1 ${status} ${statusText}\r\n`;
    let hasLength = false;
    for (let i = 0; i < headers.length; i += 2) {
      // Not checked here, per request: upstream headers passed llhttp, and the request path lets
      // only valid ones through into answers of its own (`request-path.ts`, `answer`).
      const name = headers[i];
      const value = headers[i + 1];
      if (name.length === 14 && name.toLowerCase() === "content-length") hasLength = true;
      head += `${name}: ${value}\r\n`;
    }
    this.noBody = o.method === "HEAD" || status === 204 || status === 304 || status < 200;
    if (!hasLength && !this.noBody) {
      if (o.versionMinor >= 1) {
        this.chunked = true;
        head += "transfer-encoding: chunked\r\n";
      } else o.keepAlive = false;
    }
    if (!o.keepAlive) head += "connection: close\r\n";
    else if (o.versionMinor === 0) head += "connection: keep-alive\r\n";
    this.head = head + "\r\n";
    this.headersSent = true;
  }

  write(chunk: Buffer): boolean {
    if (this.finished || this.noBody || chunk.length === 0) return true;
    const socket = this.owner.socket;
    if (socket.destroyed) return false;
    const head = this.head;
    this.head = null;
    if (this.chunked) {
      const size = `${chunk.length.toString(16)}\r\n`;
      if (head !== null && chunk.length < COALESCE_LIMIT)
        return socket.write(head + size + chunk.toString("latin1") + "\r\n", "latin1");
      socket.cork();
      socket.write(head === null ? size : head + size, "latin1");
      socket.write(chunk);
      const ok = socket.write("\r\n", "latin1");
      socket.uncork();
      return ok;
    }
    if (head === null) return socket.write(chunk);
    if (chunk.length < COALESCE_LIMIT) return socket.write(head + chunk.toString("latin1"), "latin1");
    socket.cork();
    socket.write(head, "latin1");
    const ok = socket.write(chunk);
    socket.uncork();
    return ok;
  }

  addTrailers(trailers: string[]): void {
    this.trailers = trailers;
  }

  end(last?: string): void {
    if (this.finished) return;
    if (last) this.write(Buffer.from(last));
    this.finished = true;
    const socket = this.owner.socket;
    if (!socket.destroyed) {
      let tail = this.head ?? "";
      this.head = null;
      if (this.chunked) {
        tail += "0\r\n";
        const t = this.trailers;
        if (t) for (let i = 0; i < t.length; i += 2) tail += `${t[i]}: ${t[i + 1]}\r\n`;
        tail += "\r\n";
      }
      if (tail) socket.write(tail, "latin1");
    }
    this.owner.replied();
  }

  destroy(): void {
    this.finished = true;
    this.owner.socket.destroy();
  }

  watch(watcher: ReplyWatcher): void {
    this.owner.watcher = watcher;
  }
}
