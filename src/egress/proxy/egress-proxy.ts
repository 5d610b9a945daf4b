import fs from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { destroySelf, track } from "./socket-helpers.ts";
import { CTX, type ClientRequest, type RequestAuthorizer, type SandboxHandle, type WithCtx } from "./types.ts";
import { H1Front } from "./http1/h1-front.ts";
import { H2Reply, H2Request } from "./h2-exchange.ts";
import { handleUpgrade } from "./upgrade.ts";
import { onRequest } from "./request-path.ts";
import { handleStream } from "./streams.ts";
import { ResetCounter } from "./h2-resets.ts";
import type { Logger } from "../../log/logger.ts";
import type { AuditEvent, AuditSink } from "../audit/audit-log.ts";
import { canonicalHost, parseAuthority, type CanonicalHost } from "../policy/canonical-host.ts";
import type { LeafMinter } from "./certificates.ts";
import type { EgressSettings } from "../egress-settings.ts";
import type { SandboxPolicy } from "../policy/policy.ts";
import { createResolver, type Resolve } from "./resolver.ts";
import { TargetChecker } from "./target-checker.ts";

export type { AuthorizeOutcome, OutboundRequest, RequestAuthorizer, SandboxHandle } from "./types.ts";

export interface EgressProxyOptions {
  settings: EgressSettings;
  audit: AuditSink;
  log?: Logger | null;
  resolve?: Resolve;
}

/**
 * Node 20 marks a closing HTTP/2 session destroyed before its `setTimeout(0)`, which then does
 * nothing: the idle timer stays armed and holds the session, its socket and everything they reach
 * until it fires (`idleTimeoutMs` later: 2.6 KiB per closed session, measured). The timer lives
 * under Node's `timeout` symbol; without it (another Node), nothing is done.
 */
function clearSessionTimer(session: http2.Http2Session): void {
  const key = Object.getOwnPropertySymbols(session).find((s) => s.description === "timeout");
  const timer = key && (session as unknown as Record<symbol, unknown>)[key];
  if (timer) clearTimeout(timer as NodeJS.Timeout);
}

export class EgressProxy {
  /** HTTP/1.1 from the sandboxes: explicit-proxy connections and intercepted ones (`h1-front.ts`). */
  readonly front: H1Front;
  /**
   * Intercepted TLS connections whose client picks HTTP/2 (gRPC needs it) go here; every request is
   * handled by the same `onRequest` as HTTP/1.1, on the session's raw streams (`h2-exchange.ts`).
   */
  readonly h2server: http2.Http2Server;
  private readonly h2sessions = new Set<http2.Http2Session>();
  private readonly sandboxes = new Map<string, SandboxHandle>();
  /** The proxy's resolver and address check, shared with the engines' own outbound calls. */
  readonly targets: TargetChecker;
  private readonly upstreamCa: string[];
  /** One context for every upstream TLS connection: building one from ~150 roots costs milliseconds. */
  readonly upstreamContext: tls.SecureContext;
  private readonly listeners = new Set<net.Server>();
  readonly log: Logger | null;
  stats = { requests: 0, injected: 0, blocked: 0, tunnels: 0 };

  constructor(private readonly opts: EgressProxyOptions) {
    this.targets = new TargetChecker(opts.resolve ?? createResolver(opts.settings), opts.settings.allowInternal);
    this.upstreamCa = [...tls.rootCertificates, ...opts.settings.upstreamCaPem];
    this.upstreamContext = tls.createSecureContext({ ca: this.upstreamCa, minVersion: "TLSv1.2" });
    this.log = opts.log ?? null;
    const { headerTimeoutMs, idleTimeoutMs } = opts.settings;
    // Slow heads are cut after `headerTimeoutMs`, idle keep-alive connections after `idleTimeoutMs`.
    this.front = new H1Front(
      {
        request: (req, res) => onRequest(this, req, res),
        handOver: (kind, req, socket, head) =>
          kind === "connect" ? this.onConnect(req, socket, head) : handleUpgrade(this, req, socket, head),
        rejected: (ctx, reason) => {
          if (ctx)
            this.audit(ctx.sandbox, {
              kind: "block",
              decision: "blocked",
              host: ctx.host?.host ?? "",
              port: ctx.port ?? 0,
              reason,
            });
        },
      },
      { headerTimeoutMs, idleTimeoutMs, maxHeaderSize: 32 * 1024 },
    );
    // At most 128 streams at once per session (Node's server default is unlimited).
    this.h2server = http2.createServer({
      maxHeaderListPairs: 256,
      settings: { enablePush: false, maxConcurrentStreams: 128 },
    });
    this.h2server.on(
      "stream",
      (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, _flags: number, rawHeaders: string[]) => {
        // A reset or a write after the client left: the stream's close does the rest.
        stream.on("error", destroySelf);
        let req: H2Request;
        try {
          req = new H2Request(stream, headers, rawHeaders);
        } catch (err) {
          // A stream or session gone before its request could be read: that stream only.
          this.log?.warn({ err }, "egress HTTP/2 stream dropped");
          return void stream.destroy();
        }
        onRequest(this, req, new H2Reply(stream, req.method));
      },
    );
    this.h2server.on("session", (session: http2.Http2Session) => {
      this.h2sessions.add(session);
      // An HTTP/2 connection with no stream and no frame for this long is closed.
      session.setTimeout(idleTimeoutMs, () => session.close());
      session.once("close", () => {
        this.h2sessions.delete(session);
        clearSessionTimer(session);
      });
      session.on("error", () => session.destroy());
      // Rapid reset: a session whose client aborts too many streams too fast is closed.
      const resets = new ResetCounter();
      session.on("stream", (stream: http2.ServerHttp2Stream) => {
        stream.once("aborted", () => {
          if (resets.hit(Date.now()) && !session.destroyed) session.destroy();
        });
      });
    });
    this.h2server.on("sessionError", () => {
      // One client session's protocol error ends that session only (Node closes it); nothing to do here.
    });
  }

  get settings(): EgressSettings {
    return this.opts.settings;
  }

  /** Contexts with a target's extra roots (a build step's host CA files), by file list. */
  private readonly extraContexts = new Map<string, tls.SecureContext>();

  /**
   * The upstream TLS context of a target's policy: the proxy's, plus the CA files the platform gave
   * this target (`upstream_ca_files`; the host bundle already trusted is skipped). A file that
   * cannot be read adds nothing: the upstream's certificate is then rejected, and says so.
   */
  upstreamContextFor(policy: SandboxPolicy): tls.SecureContext {
    const files = policy.upstreamCaFiles.filter((f) => f !== this.opts.settings.systemCaFile);
    if (files.length === 0) return this.upstreamContext;
    const key = files.join("\0");
    let ctx = this.extraContexts.get(key);
    if (!ctx) {
      const extra: string[] = [];
      for (const f of files) {
        try {
          extra.push(fs.readFileSync(f, "utf8"));
        } catch (err) {
          this.log?.warn({ err, file: f }, "egress: a CA file of the host's package managers cannot be read");
        }
      }
      ctx = tls.createSecureContext({ ca: [...this.upstreamCa, ...extra], minVersion: "TLSv1.2" });
      if (this.extraContexts.size > 64) this.extraContexts.clear();
      this.extraContexts.set(key, ctx);
    }
    return ctx;
  }

  // ---------------------------------------------------------------- sandboxes

  addSandbox(s: {
    id: string;
    workspaceId: string;
    policy: SandboxPolicy;
    minter: LeafMinter;
    authorizers?: RequestAuthorizer[];
  }): SandboxHandle {
    const handle: SandboxHandle = {
      ...s,
      authorizers: s.authorizers ?? [],
      tunnels: new Set(),
      sockets: new Set(),
      pools: new Map(),
      targets: new Map(),
    };
    this.sandboxes.set(s.id, handle);
    return handle;
  }

  getSandbox(id: string): SandboxHandle | undefined {
    return this.sandboxes.get(id);
  }

  /**
   * Replaces a sandbox's rules at once: the next request on any connection reads the new policy;
   * raw tunnels the new rules no longer allow are closed.
   */
  setPolicy(id: string, policy: SandboxPolicy, authorizers?: RequestAuthorizer[]): void {
    const sb = this.sandboxes.get(id);
    if (!sb) return;
    sb.policy = policy;
    if (authorizers) sb.authorizers = authorizers;
    sb.targets.clear();
    for (const t of sb.tunnels) {
      const v = policy.connectionVerdict(t.host, t.port);
      const problem =
        v.kind === "deny"
          ? v.reason
          : !v.raw
            ? "no longer a raw destination"
            : policy.addressVerdict(v, t.address, t.port, this.targets.addressOpts(), t.host);
      if (problem) {
        this.audit(sb, {
          kind: "block",
          decision: "blocked",
          host: t.host.host,
          port: t.port,
          reason: `tunnel closed by a rule change: ${problem}`,
        });
        t.client.destroy();
        t.upstream.destroy();
      }
    }
  }

  /** Removes a sandbox; with `handle`, only if it is still that registration (a newer attach wins). */
  removeSandbox(id: string, handle?: SandboxHandle): void {
    const sb = this.sandboxes.get(id);
    if (!sb || (handle && sb !== handle)) return;
    this.sandboxes.delete(id);
    for (const t of sb.tunnels) {
      t.client.destroy();
      t.upstream.destroy();
    }
    for (const s of sb.sockets) s.destroy();
    for (const p of sb.pools.values()) void p.destroy();
  }

  // ---------------------------------------------------------------- entry points

  /** A client connection speaking the HTTP proxy protocol (HTTP_PROXY / HTTPS_PROXY). */
  acceptExplicit(socket: net.Socket, sandboxId: string): void {
    const sb = this.sandboxes.get(sandboxId);
    if (!sb) return void socket.destroy();
    if (!this.admit(sb, socket, true)) return;
    socket.setNoDelay(true);
    (socket as WithCtx)[CTX] = { sandbox: sb, mode: "explicit", tls: false };
    this.front.accept(socket);
  }

  /** A captured connection whose original destination is known (transparent capture). */
  acceptTransparent(socket: net.Socket, sandboxId: string, host: CanonicalHost, port: number): void {
    const sb = this.sandboxes.get(sandboxId);
    if (!sb) return void socket.destroy();
    if (!this.admit(sb, socket, false)) return;
    socket.setNoDelay(true);
    void handleStream({ proxy: this, socket, sandbox: sb, host, port, connectReply: null }).catch((err) =>
      this.fail(socket, err),
    );
  }

  /**
   * Counts the connection against the sandbox's cap on concurrent connections; past it, refuses
   * (an explicit-proxy client reads why, a captured one is closed) and audits.
   */
  private admit(sb: SandboxHandle, socket: net.Socket, explicit: boolean): boolean {
    const cap = this.opts.settings.maxConnections;
    if (sb.sockets.size < cap) {
      track(sb, socket);
      return true;
    }
    this.audit(sb, {
      kind: "block",
      decision: "blocked",
      host: "",
      port: socket.localPort ?? 0,
      reason: `too many concurrent connections (the limit is ${cap})`,
    });
    socket.on("error", () => socket.destroy());
    if (explicit)
      socket.end(
        `HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\negress: too many concurrent connections from this sandbox (the limit is ${cap})\n`,
      );
    else socket.destroy();
    return false;
  }

  /** Refuses a captured connection outright (audited), e.g. one aimed at the sandbox's own loopback. */
  refuse(socket: net.Socket, sandboxId: string, host: string, port: number, reason: string): void {
    const sb = this.sandboxes.get(sandboxId);
    if (sb) this.audit(sb, { kind: "block", decision: "blocked", host, port, reason });
    socket.destroy();
  }

  /** Loopback listener speaking the proxy protocol (library use, tests, benchmarks). */
  async listenExplicit(sandboxId: string, host = "127.0.0.1", port = 0): Promise<net.Server> {
    return this.listen(host, port, (s) => this.acceptExplicit(s, sandboxId));
  }

  /** Loopback listener standing in for a captured destination (library use, tests, benchmarks). */
  async listenTransparent(
    sandboxId: string,
    dst: { host: string; port: number },
    host = "127.0.0.1",
    port = 0,
  ): Promise<net.Server> {
    const h = canonicalHost(dst.host);
    if (!h) throw new Error(`bad destination host ${dst.host}`);
    return this.listen(host, port, (s) => this.acceptTransparent(s, sandboxId, h, dst.port));
  }

  /** Marks an endpoint as the proxy's own (never dialled). */
  addSelfEndpoint(address: string, port: number): void {
    this.targets.addSelfEndpoint(address, port);
  }

  private async listen(host: string, port: number, onConn: (s: net.Socket) => void): Promise<net.Server> {
    const server = net.createServer({ allowHalfOpen: true, noDelay: true }, onConn);
    await new Promise<void>((resolve, reject) => server.once("error", reject).listen(port, host, resolve));
    const addr = server.address() as net.AddressInfo;
    this.addSelfEndpoint(addr.address, addr.port);
    this.listeners.add(server);
    return server;
  }

  async close(): Promise<void> {
    for (const l of this.listeners) l.close();
    for (const id of [...this.sandboxes.keys()]) this.removeSandbox(id);
    this.front.closeAll();
    for (const session of this.h2sessions) session.destroy();
  }

  // ---------------------------------------------------------------- CONNECT

  private onConnect(req: ClientRequest, socket: net.Socket, head: Buffer): void {
    const ctx = req.ctx;
    if (!ctx || ctx.mode !== "explicit")
      return void socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
    const sb = ctx.sandbox;
    const target = parseAuthority(req.url, null);
    if (!target) {
      this.audit(sb, {
        kind: "block",
        decision: "blocked",
        host: String(req.url).slice(0, 300),
        port: 0,
        reason: "malformed CONNECT target",
      });
      return void socket.end(
        "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\negress: malformed CONNECT target\n",
      );
    }
    if (head.length) socket.unshift(head);
    (socket as WithCtx)[CTX] = undefined;
    void handleStream({
      proxy: this,
      socket,
      sandbox: sb,
      host: target.host,
      port: target.port,
      connectReply: "pending",
    }).catch((err) => this.fail(socket, err));
  }

  // ---------------------------------------------------------------- helpers

  /** Records an event for the sandbox (the proxy/ paths share it); never throws. */
  audit(sb: SandboxHandle, e: Omit<AuditEvent, "sandboxId" | "workspaceId">): void {
    try {
      const event = e as AuditEvent;
      event.sandboxId = sb.id;
      event.workspaceId = sb.workspaceId;
      this.opts.audit.record(event);
    } catch (err) {
      this.log?.error({ err }, "egress audit failed");
    }
  }

  fail(socket: net.Socket, err: unknown): void {
    this.log?.warn({ err }, "egress connection failed");
    socket.destroy();
  }
}
