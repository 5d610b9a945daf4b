import net from "node:net";

/**
 * The confined agent server's only way to PostgreSQL: a listener inside its network namespace
 * (handed to the platform like the data-plane gateway's) whose connections are piped to the
 * platform's PostgreSQL. The deployment role's privileges are the real guard; the forwarder reads
 * only the connection's first message so that it can refuse any other role or database (on a
 * server that trusts loopback, a deployment could otherwise log in as anyone), then pipes bytes.
 */

/** Protocol codes of the first message (PostgreSQL frontend/backend protocol 3.0). */
const PROTOCOL_3 = 196608;
const SSL_REQUEST = 80877103;
const GSSENC_REQUEST = 80877104;
const CANCEL_REQUEST = 80877102;
/** A startup message is a handful of short parameters; anything bigger is not one. */
const MAX_STARTUP_BYTES = 10_000;

export type FirstMessage =
  | { kind: "incomplete" }
  | { kind: "ssl"; length: number }
  | { kind: "gssenc"; length: number }
  | { kind: "cancel"; length: number }
  | { kind: "startup"; length: number; params: Record<string, string> }
  | { kind: "invalid"; reason: string };

/** Decodes the first message a client sends (no type byte: Int32 length, Int32 code, body). */
export function parseFirstMessage(buf: Buffer): FirstMessage {
  if (buf.length < 8) return { kind: "incomplete" };
  const length = buf.readInt32BE(0);
  const code = buf.readInt32BE(4);
  if (length < 8 || length > MAX_STARTUP_BYTES) return { kind: "invalid", reason: `bad startup length ${length}` };
  if (code === SSL_REQUEST || code === GSSENC_REQUEST) {
    if (length !== 8) return { kind: "invalid", reason: "bad negotiation request" };
    return code === SSL_REQUEST ? { kind: "ssl", length } : { kind: "gssenc", length };
  }
  if (code === CANCEL_REQUEST) return { kind: "cancel", length };
  if (code !== PROTOCOL_3) return { kind: "invalid", reason: `unsupported protocol ${code >> 16}.${code & 0xffff}` };
  if (buf.length < length) return { kind: "incomplete" };
  const parts = buf.subarray(8, length).toString("utf8").split("\0");
  // Pairs of NUL-terminated strings, then a final NUL: the split ends with two empty strings.
  if (parts.length < 2 || parts.at(-1) !== "" || parts.at(-2) !== "")
    return { kind: "invalid", reason: "malformed startup parameters" };
  const fields = parts.slice(0, -2);
  if (fields.length % 2 !== 0) return { kind: "invalid", reason: "malformed startup parameters" };
  const params: Record<string, string> = {};
  for (let i = 0; i < fields.length; i += 2) params[fields[i]] = fields[i + 1];
  return { kind: "startup", length, params };
}

export interface ForwardTarget {
  /** The only role a deployment may log in as. */
  user: string;
  /** The only database it may open. */
  database: string;
}

/** Whether a startup message asks for exactly the deployment's role and database. */
export function admitStartup(
  params: Record<string, string>,
  target: ForwardTarget,
): { ok: true } | { ok: false; reason: string } {
  const user = params.user;
  // PostgreSQL defaults the database to the user name when the client names none.
  const database = params.database || user;
  if (user !== target.user) return { ok: false, reason: `role "${user ?? ""}" is not this deployment's role` };
  if (database !== target.database)
    return { ok: false, reason: `database "${database ?? ""}" is not this deployment's database` };
  if (params.replication !== undefined && !["false", "off", "no", "0"].includes(params.replication.toLowerCase()))
    return { ok: false, reason: "replication connections are not allowed" };
  return { ok: true };
}

/** A FATAL ErrorResponse as PostgreSQL sends it, so clients show the reason. */
export function errorResponse(code: string, message: string): Buffer {
  const body = Buffer.concat([
    field("S", "FATAL"),
    field("V", "FATAL"),
    field("C", code),
    field("M", message),
    Buffer.from([0]),
  ]);
  const head = Buffer.alloc(5);
  head.write("E", 0);
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

function field(type: string, value: string): Buffer {
  return Buffer.concat([Buffer.from(type), Buffer.from(value, "utf8"), Buffer.from([0])]);
}

/** Where the platform's PostgreSQL listens: TCP, or a unix socket file. */
export type Upstream = { host: string; port: number } | { path: string };

/** Pipes connections accepted on in-namespace listeners to PostgreSQL, one deployment's role only. */
export class DatabaseForwarder {
  private readonly sockets = new Set<net.Socket>();
  private readonly listeners = new Set<net.Server>();
  private closed = false;

  constructor(
    private readonly upstream: Upstream,
    private readonly target: ForwardTarget,
    private readonly onRefused: (reason: string) => void = () => undefined,
  ) {}

  attach(listener: net.Server): void {
    this.listeners.add(listener);
    listener.on("connection", (socket) => this.accept(socket));
  }

  close(): void {
    this.closed = true;
    for (const l of this.listeners) if (l.listening) l.close();
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  private track(socket: net.Socket): void {
    this.sockets.add(socket);
    socket.once("close", () => this.sockets.delete(socket));
  }

  private accept(client: net.Socket): void {
    if (this.closed) return void client.destroy();
    this.track(client);
    client.on("error", () => client.destroy());
    // A client that never says who it is holds nothing for long.
    client.setTimeout(10_000, () => client.destroy());
    let buf = Buffer.alloc(0);
    const onData = (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      for (;;) {
        const msg = parseFirstMessage(buf);
        if (msg.kind === "incomplete") return;
        if (msg.kind === "ssl" || msg.kind === "gssenc") {
          // No TLS on a link that never leaves the machine: say "no", the client goes on in clear.
          client.write("N");
          buf = buf.subarray(msg.length);
          continue;
        }
        client.off("data", onData);
        if (msg.kind === "startup") {
          const admitted = admitStartup(msg.params, this.target);
          if (admitted.ok) return this.connect(client, buf);
          return this.refuse(client, "28000", admitted.reason);
        }
        // A cancel request names a backend by its secret key; the deployment has no business with others'.
        if (msg.kind === "cancel") return this.refuse(client, "0A000", "cancel requests are not forwarded");
        return this.refuse(client, "08P01", msg.reason);
      }
    };
    client.on("data", onData);
  }

  private refuse(client: net.Socket, code: string, reason: string): void {
    this.onRefused(reason);
    client.end(errorResponse(code, `refused by the deployment's database forwarder: ${reason}`));
  }

  private connect(client: net.Socket, first: Buffer): void {
    client.pause();
    client.setTimeout(0);
    const server =
      "path" in this.upstream ? net.connect(this.upstream.path) : net.connect(this.upstream.port, this.upstream.host);
    this.track(server);
    server.once("connect", () => {
      server.setNoDelay(true);
      client.setNoDelay(true);
      server.write(first);
      client.pipe(server);
      server.pipe(client);
      client.resume();
    });
    server.on("error", () => {
      if (client.writable && !server.readableDidRead)
        client.end(errorResponse("08006", "the platform's PostgreSQL is unreachable"));
      else client.destroy();
    });
    client.once("close", () => server.destroy());
    server.once("close", () => client.destroy());
  }
}
