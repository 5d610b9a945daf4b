import type net from "node:net";
import type { Readable } from "node:stream";
import type { H1Pool } from "./http1/h1-upstream.ts";
import type { H2Origin } from "./h2-upstream.ts";
import type { CanonicalHost } from "../policy/canonical-host.ts";
import type { SandboxPolicy } from "../policy/policy.ts";
import type { LeafMinter } from "./certificates.ts";
import type { Target } from "./resolver.ts";

/**
 * A sandbox as the proxy knows it: identity, live rules, its CA's leaf minter, its own upstream
 * pools (never shared between sandboxes: no request of one can ride on another's connection).
 */
export interface SandboxHandle {
  id: string;
  workspaceId: string;
  policy: SandboxPolicy;
  minter: LeafMinter;
  /** Raw (un-intercepted) tunnels, re-checked and closed when the rules change. */
  tunnels: Set<RawTunnel>;
  /** Upstream connection pools (HTTP/1.1 clients; HTTP/2-first origins for HTTP/2 clients), per checked address, port and TLS name. */
  pools: Map<string, H1Pool | H2Origin>;
  /** Every client connection of this sandbox, destroyed when it is removed. */
  sockets: Set<net.Socket>;
  /** Credential engines beyond static header rules (cloud signing, tokens, callbacks), in order. */
  authorizers: RequestAuthorizer[];
  /** Resolved and checked upstream targets, per policy generation. */
  targets: Map<string, { at: number; policy: SandboxPolicy; target: Target | { blocked: string } }>;
}

export interface RawTunnel {
  host: CanonicalHost;
  port: number;
  address: string;
  client: net.Socket;
  upstream: net.Socket;
}

/** What the proxy knows about a client connection, attached to the socket it accepted. */
export interface ConnContext {
  sandbox: SandboxHandle;
  /** `explicit`: speaks the HTTP proxy protocol (CONNECT, absolute-form). `intercept`: destination known. */
  mode: "explicit" | "intercept";
  host?: CanonicalHost;
  port?: number;
  tls: boolean;
  /** The last Host header verified on this connection for `host:port` (keep-alive fast path). */
  verifiedHost?: string;
  /** The last absolute-form authority parsed on this explicit connection. */
  lastAuthority?: { text: string; parsed: { host: CanonicalHost; port: number } };
}

export const CTX = Symbol("wharf-egress-context");

/**
 * A client's request as the request path reads it: HTTP/1.1 from the proxy's own front
 * (`http1/h1-front.ts`), HTTP/2 from Node's server streams (`h2-exchange.ts`).
 */
export interface ClientRequest {
  readonly method: string;
  /** The request target as sent (HTTP/2: `:path`). */
  readonly url: string;
  /** Name/value pairs as received (HTTP/2: pseudo-headers included). */
  readonly rawHeaders: string[];
  readonly h2: boolean;
  /** What the proxy knows of the connection the request came on. */
  readonly ctx: ConnContext | undefined;
  /** The first value of a header; `name` in lower case. */
  header(name: string): string | undefined;
  /** The body to forward, or null when the request has none. */
  readonly body: Readable | null;
  /** The request is answered without its body: read and drop what is left of it. */
  discard(): void;
}

/** The answer to a `ClientRequest`; it frames the body itself (Content-Length as given, else chunked). */
export interface ClientReply {
  readonly headersSent: boolean;
  /** The client has left (its connection or stream closed): nothing more reaches it. */
  readonly gone: boolean;
  /** Flat name/value pairs, without hop-by-hop headers. */
  writeHead(status: number, statusText: string, headers: string[]): void;
  /** False: wait for `onDrain` before writing more. */
  write(chunk: Buffer): boolean;
  /** Flat name/value pairs, sent with the end of the body where the framing allows. */
  addTrailers(trailers: string[]): void;
  end(last?: string): void;
  destroy(): void;
  /** One watcher per reply (an object, not closures: one is made per request). */
  watch(watcher: ReplyWatcher): void;
}

export interface ReplyWatcher {
  /** The client left before the end of the reply. */
  clientClosed(): void;
  /** The reply is writable again after `write` returned false. */
  clientDrained(): void;
}
export type WithCtx = { [CTX]?: ConnContext };

/**
 * A request on its way upstream, as extensions (SigV4 re-signing, Google bearer tokens,
 * callbacks) see it: after access control, Host verification and static header rules. Headers are
 * ordered raw pairs (signing needs exact values and repeats); `target` is the normalised path plus
 * query exactly as it will be sent.
 */
export interface OutboundRequest {
  method: string;
  host: CanonicalHost;
  port: number;
  secure: boolean;
  target: string;
  headers: Array<[string, string]>;
  body: Readable | null;
  /** Name of the static header rule that matched (callbacks are skipped when one did). */
  staticRule: string | null;
}

export type AuthorizeOutcome =
  | { action: "pass" }
  /** Forward with these headers and body (replacing the request's). */
  | { action: "forward"; headers: Array<[string, string]>; body: Readable | null }
  /** Answer the sandbox with this; nothing goes upstream. */
  | { action: "respond"; status: number; headers: Record<string, string>; body: string };

/** One credential engine of a sandbox; run in order for every intercepted request. */
export interface RequestAuthorizer {
  name: string;
  authorize(request: OutboundRequest): Promise<AuthorizeOutcome>;
  /**
   * Requests the engine answers itself without dialling anything (a compatibility token endpoint,
   * an emulated metadata server). Consulted before access control and address classification:
   * those guard what leaves the proxy, and nothing does here.
   */
  answerLocally?(
    request: Omit<OutboundRequest, "body" | "staticRule">,
  ): (AuthorizeOutcome & { action: "respond" }) | null;
}
