import crypto from "node:crypto";
import http from "node:http";
import net from "node:net";
import type { Kysely } from "kysely";
import type { SecretBox } from "../../crypto/secret-box.ts";
import type { ServerTimeouts } from "../../http/connection-guard.ts";
import { issueBearerToken } from "../../identity/bearer-tokens.ts";
import type { Database } from "../../store/schema.ts";

/** The port a deployment's code reaches the platform's data plane on (inside its network namespace). */
export const GATEWAY_PORT = 2480;
export const GATEWAY_URL = `http://127.0.0.1:${GATEWAY_PORT}`;
export const DEPLOYMENT_LABEL = "wharf-deployment";
export const REVISION_LABEL = "wharf-revision";

/**
 * What a deployment's credential may reach: the data-plane APIs an agent needs (sandboxes and
 * their data plane, agent connections), under both the `/v2` and `/api/v2` prefixes. Decided by a
 * pure function so the table is tested on its own.
 */
export function gatewayAllows(method: string, pathname: string): boolean {
  const p = pathname.replace(/^\/api(?=\/v2\/)/, "");
  if (p.includes("/../") || p.endsWith("/..")) return false;
  if (/^\/v2\/sandboxes(\/|$)/.test(p)) return true;
  if (/^\/sandboxes\/(dp|svc)\//.test(p)) return true;
  if (/^\/v2\/auth\/(agents\/[^/]+\/connections|authenticate|wait\/|tokens?)(\/|$)/.test(p)) return true;
  void method;
  return false;
}

/** A new deployment credential: shown only to that revision's processes, valid only through its gateway. */
export function newGatewayKey(): string {
  return `wharf_dp_${crypto.randomBytes(32).toString("base64url")}`;
}

export interface GatewayRevision {
  deploymentId: string;
  revisionId: string;
  workspaceId: string;
  /** The user the deployment acts as: its creator. */
  userId: string;
  key: string;
}

/** Bounds on what one revision's code can hold open in the platform through its gateway. */
export interface GatewayLimits {
  /** Connections at once (0: no cap). */
  maxConnections: number;
  timeouts: ServerTimeouts;
}

/**
 * The platform's data plane as a deployment sees it: a listener inside the deployment's network
 * namespace (handed over by the confinement's holder), so nothing else of the host is reachable.
 * Each request must carry the revision's own key (LANGSMITH_API_KEY / X-Api-Key); it is swapped
 * for a short bearer token of the deployment's workspace, only data-plane paths pass, sandboxes it
 * creates are labelled with the deployment and revision, and platform URLs in answers (a
 * sandbox's `dataplane_url`) are rewritten to the gateway.
 */
export class DataPlaneGateway {
  private readonly server: http.Server;
  private token: { value: string; until: number } | null = null;
  /** The listeners it serves: closed with it, or each stopped revision would leave one open for good. */
  private readonly listeners = new Set<net.Server>();
  /**
   * Its connections, upgraded ones included. Tracked here: `closeAllConnections` knows only the
   * connections of a server that listens itself, and this one is fed sockets.
   */
  private readonly sockets = new Set<net.Socket>();
  /** Connections that have not sent a request head yet, and when they will be dropped. */
  private readonly headDeadlines = new WeakMap<net.Socket, NodeJS.Timeout>();

  constructor(
    private readonly rev: GatewayRevision,
    private readonly platform: { baseUrl: () => string; box: SecretBox; limits?: GatewayLimits },
  ) {
    this.server = http.createServer(
      platform.limits?.timeouts ?? {},
      (req, res) => void this.handle(req, res).catch((err: Error) => this.fail(res, 502, err.message)),
    );
    this.server.on("request", (req: http.IncomingMessage) => this.headReceived(req.socket));
    this.server.on("upgrade", (req, socket, head) => {
      this.headReceived(socket as net.Socket);
      void this.upgrade(req, socket as net.Socket, head).catch(() => socket.destroy());
    });
  }

  private headReceived(s: net.Socket): void {
    clearTimeout(this.headDeadlines.get(s));
  }

  /** Serves connections accepted by a listener inside the namespace. */
  attach(listener: net.Server): void {
    this.listeners.add(listener);
    listener.on("connection", (s: net.Socket) => {
      // Deployed code is one client: it cannot hold the platform's descriptors with connections.
      const cap = this.platform.limits?.maxConnections ?? 0;
      if (cap && this.sockets.size >= cap) return void s.destroy();
      // Node enforces its header timeout only on connections of a server that listens itself.
      const headWithin = this.platform.limits?.timeouts.headersTimeout ?? 0;
      if (headWithin) {
        const deadline = setTimeout(() => s.destroy(), headWithin).unref();
        this.headDeadlines.set(s, deadline);
        s.once("close", () => clearTimeout(deadline));
      }
      this.sockets.add(s);
      s.once("close", () => this.sockets.delete(s));
      this.server.emit("connection", s);
    });
  }

  /** Stops listening and drops every connection. */
  close(): void {
    for (const l of this.listeners) l.close();
    this.listeners.clear();
    for (const s of this.sockets) s.destroy();
    this.sockets.clear();
  }

  private authorized(req: http.IncomingMessage): boolean {
    const given =
      (req.headers["x-api-key"] as string | undefined) ?? (req.headers.authorization ?? "").replace(/^bearer\s+/i, "");
    const a = Buffer.from(given);
    const b = Buffer.from(this.rev.key);
    return a.length === b.length && crypto.timingSafeEqual(a, b);
  }

  private async bearer(): Promise<string> {
    if (!this.token || this.token.until < Date.now() + 30_000) {
      const t = await issueBearerToken(
        this.platform.box,
        { userId: this.rev.userId, workspaceId: this.rev.workspaceId },
        300,
      );
      this.token = { value: t.token, until: Date.now() + 300_000 };
    }
    return this.token.value;
  }

  private async forwardHeaders(
    req: http.IncomingMessage,
    bodyLength: number | null,
  ): Promise<http.OutgoingHttpHeaders> {
    const headers: http.OutgoingHttpHeaders = {};
    for (const [k, v] of Object.entries(req.headers)) {
      if (
        [
          "x-api-key",
          "authorization",
          "x-tenant-id",
          "host",
          "content-length",
          "cookie",
          "x-forwarded-for",
          "x-forwarded-host",
        ].includes(k)
      )
        continue;
      headers[k] = v;
    }
    headers.authorization = `Bearer ${await this.bearer()}`;
    if (bodyLength !== null) headers["content-length"] = String(bodyLength);
    return headers;
  }

  private fail(res: http.ServerResponse, status: number, detail: string): void {
    if (res.headersSent) return void res.destroy();
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify({ detail }));
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const url = new URL(req.url ?? "/", "http://gateway");
    if (!this.authorized(req))
      return this.fail(res, 401, "This deployment's credential is required (LANGSMITH_API_KEY)");
    if (!gatewayAllows(req.method ?? "GET", url.pathname))
      return this.fail(res, 403, "A deployment's credential reaches the data-plane APIs only (sandboxes, connections)");
    const chunks: Buffer[] = [];
    for await (const c of req) chunks.push(c as Buffer);
    let body: Buffer | null = req.method === "GET" || req.method === "HEAD" ? null : Buffer.concat(chunks);
    if (body && req.method === "POST" && /^(\/api)?\/v2\/sandboxes\/boxes\/?$/.test(url.pathname))
      body = this.labelled(body);
    const base = this.platform.baseUrl();
    const upstream = await new Promise<http.IncomingMessage>((resolve, reject) => {
      const r = http.request(new URL(url.pathname + url.search, base), { method: req.method }, resolve);
      r.once("error", reject);
      void this.forwardHeaders(req, body ? body.length : null).then((h) => {
        for (const [k, v] of Object.entries(h)) if (v !== undefined) r.setHeader(k, v);
        r.end(body ?? undefined);
      }, reject);
    });
    const headers = { ...upstream.headers };
    const json = String(headers["content-type"] ?? "").includes("application/json");
    if (!json) {
      res.writeHead(upstream.statusCode ?? 502, headers);
      upstream.pipe(res);
      return;
    }
    // Platform URLs in answers (dataplane_url and the like) point back through the gateway.
    const out: Buffer[] = [];
    for await (const c of upstream) out.push(c as Buffer);
    const text = Buffer.from(Buffer.concat(out).toString("utf8").split(base).join(GATEWAY_URL));
    delete headers["content-length"];
    delete headers["transfer-encoding"];
    res.writeHead(upstream.statusCode ?? 502, { ...headers, "content-length": String(text.length) });
    res.end(text);
  }

  /** Sandboxes a deployment creates carry its deployment and revision, so they go with it. */
  private labelled(body: Buffer): Buffer {
    try {
      const parsed = JSON.parse(body.toString("utf8")) as Record<string, unknown>;
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) return body;
      const labels =
        parsed.labels && typeof parsed.labels === "object" && !Array.isArray(parsed.labels)
          ? (parsed.labels as Record<string, unknown>)
          : {};
      parsed.labels = { ...labels, [DEPLOYMENT_LABEL]: this.rev.deploymentId, [REVISION_LABEL]: this.rev.revisionId };
      // A TTL as well: should the platform never get to delete it, a stopped box goes after an hour.
      parsed.delete_after_stop_seconds ??= 3600;
      return Buffer.from(JSON.stringify(parsed));
    } catch {
      return body; // not JSON: the platform answers 422 itself
    }
  }

  /** WebSocket upgrades (`/execute/ws`): checked like requests, then spliced to the platform. */
  private async upgrade(req: http.IncomingMessage, socket: net.Socket, head: Buffer): Promise<void> {
    const url = new URL(req.url ?? "/", "http://gateway");
    if (!this.authorized(req) || !gatewayAllows(req.method ?? "GET", url.pathname)) {
      socket.end("HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
      return;
    }
    const base = new URL(this.platform.baseUrl());
    const headers = await this.forwardHeaders(req, null);
    headers.host = base.host;
    headers.connection = "Upgrade";
    headers.upgrade = req.headers.upgrade;
    const upstream = net.connect(Number(base.port), base.hostname.replace(/^\[|\]$/g, ""));
    upstream.once("connect", () => {
      const lines = [`${req.method} ${url.pathname}${url.search} HTTP/1.1`];
      for (const [k, v] of Object.entries(headers))
        if (v !== undefined) for (const one of Array.isArray(v) ? v : [v]) lines.push(`${k}: ${one}`);
      upstream.write(lines.join("\r\n") + "\r\n\r\n");
      if (head.length) upstream.write(head);
      upstream.pipe(socket);
      socket.pipe(upstream);
    });
    const end = () => {
      upstream.destroy();
      socket.destroy();
    };
    upstream.once("error", end);
    socket.once("error", end);
    upstream.once("close", end);
    socket.once("close", end);
  }
}

/** The user a deployment acts as on the data plane: the creator of its control-plane key. */
export async function deploymentUser(db: Kysely<Database>, apiKeyId: string): Promise<string | null> {
  const row = await db.selectFrom("api_keys").select(["user_id"]).where("id", "=", apiKeyId).executeTakeFirst();
  return row?.user_id ?? null;
}

/**
 * Deletes the sandboxes a deployment's code created (by label: one revision, or the whole
 * deployment), through the platform's own API as the deployment's user.
 */
export async function deleteLabelledSandboxes(
  platform: { baseUrl: () => string; box: SecretBox },
  who: { userId: string; workspaceId: string },
  label: string,
  value: string,
): Promise<number> {
  const { token } = await issueBearerToken(platform.box, who, 120);
  const headers = { authorization: `Bearer ${token}` };
  const list = await fetch(
    `${platform.baseUrl()}/v2/sandboxes/boxes?label=${encodeURIComponent(`${label}=${value}`)}&limit=100`,
    { headers },
  );
  if (list.status !== 200) return 0; // no sandboxes feature on this platform
  const { sandboxes } = (await list.json()) as { sandboxes: Array<{ id: string; name: string }> };
  let deleted = 0;
  for (const sb of sandboxes) {
    const res = await fetch(`${platform.baseUrl()}/v2/sandboxes/boxes/${encodeURIComponent(sb.id)}`, {
      method: "DELETE",
      headers,
    });
    await res.arrayBuffer();
    if (res.status === 204 || res.status === 404) deleted++;
  }
  return deleted;
}
