import type net from "node:net";
import type { Readable } from "node:stream";
import { H1Reply, type ReplyOwner } from "./h1-reply.ts";
import { CTX, type ClientRequest, type ConnContext, type ReplyWatcher, type WithCtx } from "../types.ts";

/** What an exchange needs of its connection (`h1-front.ts`). */
export interface ExchangeConnection {
  readonly socket: net.Socket;
  /** Read the socket again (a body's consumer wants more, or it is being dropped). */
  resumeReading(): void;
  /** The exchange's answer is complete (or cut). */
  replied(ex: H1Exchange): void;
}

/** One request on a connection, from its head to the end of its answer. */
export class H1Exchange implements ClientRequest, ReplyOwner {
  readonly h2 = false;
  readonly reply: H1Reply;
  body: Readable | null = null;
  /** The request's message has been read to its end. */
  requestDone = false;
  /** Its answer is complete (or cut). */
  answered = false;
  /** Body bytes that arrive now are dropped (answered without them). */
  discarding = false;
  watcher: ReplyWatcher | null = null;

  constructor(
    private readonly conn: ExchangeConnection,
    readonly method: string,
    readonly url: string,
    readonly rawHeaders: string[],
    readonly versionMinor: number,
    public keepAlive: boolean,
  ) {
    this.reply = new H1Reply(this);
  }

  get socket(): net.Socket {
    return this.conn.socket;
  }

  get ctx(): ConnContext | undefined {
    return (this.conn.socket as WithCtx)[CTX];
  }

  header(name: string): string | undefined {
    const raw = this.rawHeaders;
    for (let i = 0; i < raw.length; i += 2)
      if (raw[i].length === name.length && raw[i].toLowerCase() === name) return raw[i + 1];
    return undefined;
  }

  discard(): void {
    this.discarding = true;
    if (this.body) {
      this.body.removeAllListeners("data");
      this.body = null;
    }
    this.conn.resumeReading();
  }

  replied(): void {
    if (this.answered) return;
    this.answered = true;
    this.watcher = null;
    this.conn.replied(this);
  }
}

/** Does a request head announce a body (llhttp has already refused a bad or conflicting framing)? */
export function hasBody(raw: string[]): boolean {
  for (let i = 0; i < raw.length; i += 2) {
    const n = raw[i];
    if (n.length === 17 && n.toLowerCase() === "transfer-encoding") return true;
    if (n.length === 14 && n.toLowerCase() === "content-length" && raw[i + 1].trim() !== "0") return true;
  }
  return false;
}
