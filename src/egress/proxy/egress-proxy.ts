import crypto from "node:crypto";
import http from "node:http";
import http2 from "node:http2";
import net from "node:net";
import tls from "node:tls";
import { Pool, type Dispatcher } from "undici";
import type { Readable } from "node:stream";
import { DROP_REQUEST, pairs, upstreamHeaders } from "./header-filter.ts";
import { readAtLeast, track } from "./socket-helpers.ts";
import { CTX, type AuthorizeOutcome, type OutboundRequest, type RawTunnel, type RequestAuthorizer, type SandboxHandle, type WithCtx } from "./types.ts";
import { UpstreamHandler } from "./upstream-handler.ts";
import { handleUpgrade } from "./upgrade.ts";
import type { Logger } from "../../log/logger.ts";
import { isWebPort } from "../policy/access-patterns.ts";
import type { AuditEvent, AuditSink } from "../audit/audit-log.ts";
import { canonicalHost, hostForUrl, parseAuthority, type CanonicalHost } from "../policy/canonical-host.ts";
import type { LeafMinter } from "./certificates.ts";
import { looksLikeTls, parseClientHello } from "./client-hello.ts";
import type { EgressSettings } from "../egress-settings.ts";
import { normalisePath } from "../policy/path-patterns.ts";
import type { ConnectionVerdict, InjectedHeader, SandboxPolicy } from "../policy/policy.ts";
import { createResolver, type Resolve, type Target } from "./resolver.ts";
import { TargetChecker } from "./target-checker.ts";

const CONNECT_TIMEOUT_MS = 10_000;

export type { AuthorizeOutcome, OutboundRequest, RequestAuthorizer, SandboxHandle } from "./types.ts";

export interface EgressProxyOptions {
  settings: EgressSettings;
  audit: AuditSink;
  log?: Logger | null;
  resolve?: Resolve;
}

export class EgressProxy {
  readonly server: http.Server;
  /**
   * Intercepted TLS connections whose client picks HTTP/2 (gRPC needs it) go here; every request is
   * handled by the same `onRequest` as HTTP/1.1, through Node's compatibility request/response.
   */
  private readonly h2server: http2.Http2Server;
  private readonly h2sessions = new Set<http2.Http2Session>();
  private readonly sandboxes = new Map<string, SandboxHandle>();
  /** The proxy's resolver and address check, shared with the engines' own outbound calls. */
  readonly targets: TargetChecker;
  private readonly upstreamCa: string[];
  /** One context for every upstream TLS connection: building one from ~150 roots costs milliseconds. */
  readonly upstreamContext: tls.SecureContext;
  private readonly listeners = new Set<net.Server>();
  private readonly log: Logger | null;
  stats = { requests: 0, injected: 0, blocked: 0, tunnels: 0 };

  constructor(private readonly opts: EgressProxyOptions) {
    this.targets = new TargetChecker(opts.resolve ?? createResolver(opts.settings), opts.settings.allowInternal);
    this.upstreamCa = [...tls.rootCertificates, ...opts.settings.upstreamCaPem];
    this.upstreamContext = tls.createSecureContext({ ca: this.upstreamCa, minVersion: "TLSv1.2" });
    this.log = opts.log ?? null;
    const { headerTimeoutMs, idleTimeoutMs } = opts.settings;
    // Slow headers are cut after `headerTimeoutMs` (checked every second at most; Node's default
    // check runs every 30 s), idle keep-alive connections after `idleTimeoutMs`.
    this.server = http.createServer({ noDelay: true, keepAliveTimeout: idleTimeoutMs, headersTimeout: headerTimeoutMs, requestTimeout: 0, maxHeaderSize: 32 * 1024, connectionsCheckingInterval: Math.min(1_000, Math.max(100, headerTimeoutMs >> 1)) });
    this.server.on("request", (req, res) => this.onRequest(req, res));
    // Node tracks connections for its header and request timeouts from the server's 'listening'
    // event; this server never listens (connections are handed to it), so start the tracking here.
    this.server.emit("listening");
    this.h2server = http2.createServer({ maxHeaderListPairs: 256, settings: { enablePush: false } });
    this.h2server.on("request", (req, res) => this.onRequest(req as unknown as http.IncomingMessage, res as unknown as http.ServerResponse));
    this.h2server.on("session", (session: http2.Http2Session) => {
      this.h2sessions.add(session);
      // An HTTP/2 connection with no stream and no frame for this long is closed.
      session.setTimeout(idleTimeoutMs, () => session.close());
      session.once("close", () => this.h2sessions.delete(session));
      session.on("error", () => session.destroy());
    });
    this.h2server.on("sessionError", () => {});
    this.server.on("connect", (req, socket, head) => this.onConnect(req, socket as net.Socket, head));
    this.server.on("upgrade", (req, socket, head) => handleUpgrade(this, req, socket as net.Socket, head));
    this.server.on("clientError", (err, socket) => {
      const ctx = (socket as WithCtx)[CTX];
      if (ctx) this.audit(ctx.sandbox, { kind: "block", decision: "blocked", host: ctx.host?.host ?? "", port: ctx.port ?? 0, reason: `malformed HTTP from the sandbox (${(err as NodeJS.ErrnoException).code ?? "parse error"})` });
      if (socket.writable && !(err as NodeJS.ErrnoException).code?.startsWith("ECONN")) socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 0\r\n\r\n");
      else socket.destroy();
    });
  }

  // ---------------------------------------------------------------- sandboxes

  addSandbox(s: { id: string; workspaceId: string; policy: SandboxPolicy; minter: LeafMinter; authorizers?: RequestAuthorizer[] }): SandboxHandle {
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
      const problem = v.kind === "deny" ? v.reason : !v.raw ? "no longer a raw destination" : policy.addressVerdict(v, t.address, t.port, this.targets.addressOpts());
      if (problem) {
        this.audit(sb, { kind: "block", decision: "blocked", host: t.host.host, port: t.port, reason: `tunnel closed by a rule change: ${problem}` });
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
    this.server.emit("connection", socket);
  }

  /** A captured connection whose original destination is known (transparent capture). */
  acceptTransparent(socket: net.Socket, sandboxId: string, host: CanonicalHost, port: number): void {
    const sb = this.sandboxes.get(sandboxId);
    if (!sb) return void socket.destroy();
    if (!this.admit(sb, socket, false)) return;
    socket.setNoDelay(true);
    void this.handleStream(socket, sb, host, port, null).catch((err) => this.fail(socket, err));
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
    this.audit(sb, { kind: "block", decision: "blocked", host: "", port: socket.localPort ?? 0, reason: `too many concurrent connections (the limit is ${cap})` });
    socket.on("error", () => socket.destroy());
    if (explicit) socket.end(`HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\negress: too many concurrent connections from this sandbox (the limit is ${cap})\n`);
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
  async listenTransparent(sandboxId: string, dst: { host: string; port: number }, host = "127.0.0.1", port = 0): Promise<net.Server> {
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
    this.server.closeAllConnections?.();
    for (const session of this.h2sessions) session.destroy();
  }

  // ---------------------------------------------------------------- streams (captured or tunnelled)

  /**
   * A byte stream to a known destination: raw tunnel, TLS interception or plain HTTP, decided by
   * the rules and by the first bytes. `connectReply` is the CONNECT socket still owed its answer.
   */
  private async handleStream(socket: net.Socket, sb: SandboxHandle, host: CanonicalHost, port: number, connectReply: "pending" | null): Promise<void> {
    // A reset from the sandbox is routine; whoever owns the socket next adds its own handling.
    if (!socket.listenerCount("error")) socket.on("error", () => socket.destroy());
    const verdict = sb.policy.connectionVerdict(host, port);
    if (verdict.kind === "allow" && verdict.raw) return this.rawTunnel(socket, sb, host, port, verdict, connectReply);
    if (!isWebPort(port)) {
      const reason = verdict.kind === "deny" ? verdict.reason : "raw TCP is not allowed";
      this.audit(sb, { kind: "block", decision: "blocked", host: host.host, port, reason });
      if (connectReply) socket.end(`HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nX-Wharf-Egress: blocked\r\nConnection: close\r\n\r\negress blocked: ${reason}\n`);
      else socket.destroy();
      return;
    }
    if (connectReply) socket.write("HTTP/1.1 200 Connection Established\r\n\r\n");
    // Ports 80/443: always intercepted. A denied destination is still answered (403) over HTTP(S),
    // so the sandbox sees why; the decision is re-made for every request anyway.
    // One deadline for the whole peek: a ClientHello dribbled a byte at a time is cut all the same.
    const deadline = Date.now() + this.opts.settings.headerTimeoutMs;
    const first = await readAtLeast(socket, 1, deadline - Date.now());
    if (!first) return void socket.destroy();
    if (looksLikeTls(first[0])) {
      let buf = first;
      let hello = parseClientHello(buf, this.opts.settings.maxPeekBytes);
      while (hello.status === "need-more") {
        const more = await readAtLeast(socket, 1, deadline - Date.now());
        if (!more) return void socket.destroy();
        buf = Buffer.concat([buf, more]);
        hello = parseClientHello(buf, this.opts.settings.maxPeekBytes);
      }
      if (hello.status === "invalid") {
        this.audit(sb, { kind: "block", decision: "blocked", host: host.host, port, reason: `unreadable TLS ClientHello: ${hello.reason}` });
        return void socket.destroy();
      }
      if (!this.sniMatches(hello.serverName, host)) {
        this.audit(sb, { kind: "block", decision: "blocked", host: host.host, port, reason: `TLS server name ${JSON.stringify(hello.serverName)} does not match the destination` });
        return void socket.destroy();
      }
      const context = sb.minter.peek(host) ?? (await sb.minter.contextFor(host));
      socket.unshift(buf);
      const secure = new tls.TLSSocket(socket, { isServer: true, secureContext: context, ALPNProtocols: ["h2", "http/1.1"] });
      secure.on("error", () => secure.destroy());
      // The handshake must finish within what is left of the deadline (the HTTP servers time the rest).
      const handshake = setTimeout(() => secure.destroy(), Math.max(0, deadline - Date.now()));
      secure.once("close", () => clearTimeout(handshake));
      (secure as WithCtx)[CTX] = { sandbox: sb, mode: "intercept", host, port, tls: true };
      // The protocol is known once the handshake is done: HTTP/2 only for clients that ask for it.
      secure.once("secure", () => {
        clearTimeout(handshake);
        // What tls.Server does for its own sockets; an HTTP/2 session waits for it before reading.
        (secure as tls.TLSSocket & { secureConnecting: boolean }).secureConnecting = false;
        (secure.alpnProtocol === "h2" ? this.h2server : this.server).emit("connection", secure);
      });
      return;
    }
    if (!/^[A-Z]/.test(String.fromCharCode(first[0]))) {
      this.audit(sb, { kind: "block", decision: "blocked", host: host.host, port, reason: "neither HTTP nor TLS on a web port" });
      return void socket.destroy();
    }
    socket.unshift(first);
    (socket as WithCtx)[CTX] = { sandbox: sb, mode: "intercept", host, port, tls: false };
    this.server.emit("connection", socket);
  }

  /** SNI must name the destination; it may be absent only when the destination is an IP literal. */
  private sniMatches(serverName: string | null, host: CanonicalHost): boolean {
    if (serverName === null) return host.kind !== "name";
    const sni = canonicalHost(serverName);
    return sni !== null && sni.kind === host.kind && sni.host === host.host;
  }

  private async rawTunnel(client: net.Socket, sb: SandboxHandle, host: CanonicalHost, port: number, verdict: ConnectionVerdict, connectReply: "pending" | null): Promise<void> {
    const target = await this.targets.check(sb, sb.policy, host, port, verdict);
    if ("blocked" in target) {
      this.audit(sb, { kind: "block", decision: "blocked", host: host.host, port, reason: target.blocked });
      if (connectReply) client.end(`HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nX-Wharf-Egress: blocked\r\nConnection: close\r\n\r\negress blocked: ${target.blocked}\n`);
      else client.destroy();
      return;
    }
    const upstream = net.connect({ host: target.address, port: target.port, allowHalfOpen: true, noDelay: true, timeout: CONNECT_TIMEOUT_MS });
    const tunnel: RawTunnel = { host, port, address: target.address, client, upstream };
    upstream.once("timeout", () => upstream.destroy(new Error("connect timeout")));
    upstream.once("connect", () => {
      upstream.setTimeout(0);
      sb.tunnels.add(tunnel);
      this.stats.tunnels++;
      this.audit(sb, { kind: "tunnel", decision: "allowed", host: host.host, port, reason: sb.policy.isNoProxy(host) ? "no_proxy (not intercepted)" : "raw TCP (not intercepted)" });
      if (connectReply) client.write("HTTP/1.1 200 Connection Established\r\n\r\n");
      client.pipe(upstream);
      upstream.pipe(client);
    });
    const done = () => {
      sb.tunnels.delete(tunnel);
      client.destroy();
      upstream.destroy();
    };
    upstream.once("error", (err) => {
      if (!sb.tunnels.has(tunnel)) {
        this.audit(sb, { kind: "block", decision: "failed", host: host.host, port, reason: `upstream connection failed (${(err as NodeJS.ErrnoException).code ?? err.message})` });
        if (connectReply) client.end(`HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\negress: upstream connection failed\n`);
      }
      done();
    });
    client.once("error", done);
    upstream.once("close", done);
    client.once("close", done);
  }

  // ---------------------------------------------------------------- upstream targets

  // ---------------------------------------------------------------- HTTP requests

  private onConnect(req: http.IncomingMessage, socket: net.Socket, head: Buffer): void {
    const ctx = (socket as WithCtx)[CTX];
    if (!ctx || ctx.mode !== "explicit") return void socket.end("HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n");
    const sb = ctx.sandbox;
    const target = parseAuthority(req.url ?? "", null);
    if (!target) {
      this.audit(sb, { kind: "block", decision: "blocked", host: String(req.url).slice(0, 300), port: 0, reason: "malformed CONNECT target" });
      return void socket.end("HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nConnection: close\r\n\r\negress: malformed CONNECT target\n");
    }
    if (head.length) socket.unshift(head);
    (socket as WithCtx)[CTX] = undefined;
    void this.handleStream(socket, sb, target.host, target.port, "pending").catch((err) => this.fail(socket, err));
  }

  /**
   * Every request's handling is contained: an unexpected error answers that request 502 with a
   * request id (logged with it) and goes no further.
   */
  private onRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    try {
      if (this.opts.settings.faultHook && req.headers["x-wharf-egress-fault"] === "crash") injectCrash();
      this.handleRequest(req, res);
    } catch (err) {
      this.internalError(res, err);
    }
  }

  private internalError(res: http.ServerResponse, err: unknown): void {
    const requestId = crypto.randomUUID();
    this.log?.error({ err, requestId }, "egress request failed unexpectedly");
    if (!res.headersSent) this.reply(res, 502, `egress: internal error (request id ${requestId})`, { "x-request-id": requestId });
    else res.destroy();
  }

  private handleRequest(req: http.IncomingMessage, res: http.ServerResponse): void {
    const ctx = (req.socket as WithCtx)[CTX];
    if (!ctx) return void res.destroy();
    this.stats.requests++;
    const sb = ctx.sandbox;
    let host: CanonicalHost;
    let port: number;
    let target = req.url ?? "";
    if (ctx.mode === "explicit") {
      // Absolute-form request to the proxy: the destination is the URL's authority.
      const m = /^http:\/\/([^/?#]*)(.*)$/i.exec(target);
      let a = m && ctx.lastAuthority?.text === m[1] ? ctx.lastAuthority.parsed : null;
      if (m && !a) {
        a = m[1].includes("@") ? null : parseAuthority(m[1], 80);
        if (a) ctx.lastAuthority = { text: m[1], parsed: a };
      }
      if (!m || !a) return this.reply(res, 400, "egress: the proxy accepts absolute http:// URLs and CONNECT only");
      host = a.host;
      port = a.port;
      target = m[2] === "" ? "/" : m[2].startsWith("?") ? `/${m[2]}` : m[2];
    } else {
      host = ctx.host!;
      port = ctx.port!;
      if (/^https?:\/\//i.test(target)) {
        const m = /^(https?):\/\/([^/?#]*)(.*)$/i.exec(target)!;
        const a = parseAuthority(m[2], ctx.tls ? 443 : 80);
        if (!a || a.host.kind !== host.kind || a.host.host !== host.host || a.port !== port) return this.misdirected(sb, res, req, host, port, "request target names another host");
        target = m[3] === "" ? "/" : m[3];
      }
    }
    // Every request's Host must name the verified destination (no domain fronting).
    const hostHeader = req.headers.host ?? (req.httpVersionMajor === 2 ? (req.headers[":authority"] as string | undefined) : undefined);
    const verifiedKey = ctx.mode === "intercept" ? hostHeader : `${hostHeader}|${host.host}|${port}`;
    if (verifiedKey === undefined || verifiedKey !== ctx.verifiedHost) {
      const h = hostHeader === undefined ? null : parseAuthority(hostHeader, ctx.tls ? 443 : 80);
      if (!h || h.host.kind !== host.kind || h.host.host !== host.host || h.port !== port) return this.misdirected(sb, res, req, host, port, `Host ${JSON.stringify(hostHeader ?? null)} does not match the destination`);
      ctx.verifiedHost = verifiedKey;
    }
    const q = target.indexOf("?");
    const rawPath = q < 0 ? target : target.slice(0, q);
    const path = normalisePath(rawPath);
    if (path === null) return this.reply(res, 400, "egress: malformed request path");
    const query = q < 0 ? "" : target.slice(q);
    void this.forward(req, res, sb, host, port, ctx.tls, path, query).catch((err) => this.internalError(res, err));
  }

  private misdirected(sb: SandboxHandle, res: http.ServerResponse, req: http.IncomingMessage, host: CanonicalHost, port: number, reason: string): void {
    this.audit(sb, { kind: "block", decision: "blocked", host: host.host, port, method: req.method, reason });
    this.reply(res, 421, `egress: ${reason}`);
  }

  private reply(res: http.ServerResponse, status: number, text: string, extra: Record<string, string> = {}): void {
    if (res.headersSent) return void res.destroy();
    const body = text + "\n";
    res.writeHead(status, { "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(body), ...extra });
    res.end(body);
  }

  /** Decides, injects and forwards one request; the rules are read once, at its start. */
  private async forward(req: http.IncomingMessage, res: http.ServerResponse, sb: SandboxHandle, host: CanonicalHost, port: number, secure: boolean, path: string, query: string): Promise<void> {
    const policy = sb.policy;
    if (!policy.isNoProxy(host)) {
      for (const a of sb.authorizers) {
        const local = a.answerLocally?.({ method: req.method ?? "GET", host, port, secure, target: path + query, headers: pairs(req.rawHeaders) });
        if (!local) continue;
        req.resume();
        if (res.headersSent) return void res.destroy();
        res.writeHead(local.status, { ...local.headers, "content-length": Buffer.byteLength(local.body) });
        return void res.end(local.body);
      }
    }
    const verdict = policy.connectionVerdict(host, port);
    const target = await this.targets.check(sb, policy, host, port, verdict);
    if ("blocked" in target) {
      this.stats.blocked++;
      this.audit(sb, { kind: "block", decision: "blocked", host: host.host, port, method: req.method, path, reason: target.blocked });
      return this.reply(res, 403, `egress blocked: ${target.blocked}`, { "x-wharf-egress": "blocked" });
    }
    const cred = this.credentialsFor(sb, policy, host, path);
    if (cred && cred.error) {
      this.audit(sb, { kind: "credential", decision: "failed", rule: cred.rule, host: host.host, port, method: req.method, path, reason: cred.error });
      return this.reply(res, 502, `egress: credential for rule ${cred.rule} is unavailable`);
    }
    if (cred?.headers) {
      this.stats.injected++;
      this.audit(sb, { kind: "inject", decision: "injected", rule: cred.rule, host: host.host, port, method: req.method, path });
    }
    const authority = port === (secure ? 443 : 80) ? hostForUrl(host) : `${hostForUrl(host)}:${port}`;
    const h2 = req.httpVersionMajor === 2;
    const headers = upstreamHeaders(req, cred?.headers ?? null, authority, h2);
    // HTTP/2 frames bodies itself: a request has one unless its HEADERS frame ended the stream.
    const hasBody = h2 ? !(req as unknown as { stream: http2.ServerHttp2Stream }).stream.endAfterHeaders : req.headers["content-length"] !== undefined ? req.headers["content-length"] !== "0" : req.headers["transfer-encoding"] !== undefined;
    if (sb.authorizers.length === 0 || policy.isNoProxy(host)) return this.dispatchUpstream(res, sb, host, port, secure, h2, target, req.method ?? "GET", path, path + query, headers, hasBody ? req : null);
    // Extensions run in order, each on the previous one's result; the last word is what is sent.
    let out: OutboundRequest = { method: req.method ?? "GET", host, port, secure, target: path + query, headers: pairs(headers), body: hasBody ? req : null, staticRule: cred?.rule ?? null };
    for (const a of sb.authorizers) {
      let outcome: AuthorizeOutcome;
      try {
        outcome = await a.authorize(out);
      } catch (err) {
        this.audit(sb, { kind: "credential", decision: "failed", rule: a.name, host: host.host, port, method: req.method, path, reason: (err as Error).message.slice(0, 300) });
        return this.reply(res, 502, `egress: credential engine ${a.name} failed`);
      }
      if (outcome.action === "respond") {
        if (res.headersSent) return void res.destroy();
        res.writeHead(outcome.status, { ...outcome.headers, "content-length": Buffer.byteLength(outcome.body) });
        return void res.end(outcome.body);
      }
      if (outcome.action === "forward") out = { ...out, headers: outcome.headers, body: outcome.body };
    }
    const flat: string[] = [];
    for (const [n, v] of out.headers) {
      const lower = n.toLowerCase();
      if (lower === "host" || !DROP_REQUEST.has(lower) || (h2 && lower === "te")) flat.push(n, v);
    }
    this.dispatchUpstream(res, sb, host, port, secure, h2, target, out.method, path, out.target, flat, out.body);
  }

  /**
   * Sends one request upstream through the sandbox's undici pool for the checked address (keep-alive,
   * no pipelining) and streams the answer back with backpressure. undici frames request bodies
   * itself (a streamed body is always chunked, whatever the method) and checks Content-Length.
   */
  private dispatchUpstream(res: http.ServerResponse, sb: SandboxHandle, host: CanonicalHost, port: number, secure: boolean, h2: boolean, target: Target, method: string, path: string, requestTarget: string, headers: string[], body: Readable | null): void {
    const pool = this.poolFor(sb, secure, target, host, h2);
    const handler = new UpstreamHandler(res, (err) => {
      const code = err.code ?? err.name ?? "error";
      const verify = /CERT|SELF_SIGNED|UNABLE_TO|ERR_TLS/.test(code) || /certificate/i.test(err.message);
      this.audit(sb, { kind: "block", decision: "failed", host: host.host, port, method, path, reason: verify ? `upstream certificate rejected (${code})` : `upstream connection failed (${code})` });
      if (!res.headersSent) this.reply(res, 502, verify ? `egress: upstream certificate verification failed (${code})` : `egress: upstream connection failed (${code})`);
      else res.destroy();
    });
    pool.dispatch({ method, path: requestTarget, headers, body, idempotent: false }, handler as unknown as Dispatcher.DispatchHandler);
  }

  /**
   * `h2`: the sandbox's client speaks HTTP/2, so upstream is offered HTTP/2 as well (gRPC needs it
   * end to end; a server that only knows HTTP/1.1 still works). HTTP/1.1 clients keep HTTP/1.1.
   */
  private poolFor(sb: SandboxHandle, secure: boolean, target: Target, host: CanonicalHost, h2 = false): Pool {
    const servername = secure && host.kind === "name" ? host.host : "";
    const useH2 = h2 && secure;
    const key = `${secure ? "s" : "p"}${useH2 ? "2" : ""}|${target.address}|${target.port}|${servername}`;
    let pool = sb.pools.get(key);
    if (!pool) {
      const origin = `${secure ? "https" : "http"}://${target.address.includes(":") ? `[${target.address}]` : target.address}:${target.port}`;
      pool = new Pool(origin, {
        connections: 512,
        pipelining: 1,
        keepAliveTimeout: 15_000,
        headersTimeout: 300_000,
        bodyTimeout: 300_000,
        allowH2: useH2,
        connect: secure ? { secureContext: this.upstreamContext, servername: servername || undefined, ALPNProtocols: useH2 ? ["h2", "http/1.1"] : ["http/1.1"], timeout: CONNECT_TIMEOUT_MS } : { timeout: CONNECT_TIMEOUT_MS },
      });
      if (sb.pools.size > 256) {
        const [oldKey, old] = sb.pools.entries().next().value!;
        sb.pools.delete(oldKey);
        void old.close();
      }
      sb.pools.set(key, pool);
    }
    return pool;
  }

  /** The headers to inject for this request (first matching header rule), or an unavailable credential. */
  credentialsFor(_sb: SandboxHandle, policy: SandboxPolicy, host: CanonicalHost, path: string): { rule: string; headers: InjectedHeader[] | null; error: string | null } | null {
    if (policy.isNoProxy(host)) return null;
    const rule = policy.headerRuleFor(host, path);
    if (!rule) return null;
    if (!rule.headers) return { rule: rule.name, headers: null, error: rule.problem ?? "unresolved" };
    return { rule: rule.name, headers: rule.headers, error: null };
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

/**
 * The operator's fault hook (`WHARF_EGRESS_FAULT_HOOK=1`, off by default): an exception thrown
 * outside any request's handling, as a bug in a library would, to prove a crash stays in the
 * data-plane process.
 */
function injectCrash(): void {
  setImmediate(() => {
    throw new Error("egress fault hook: injected crash");
  });
}
