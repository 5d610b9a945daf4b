import http from "node:http";
import type net from "node:net";
import { Readable } from "node:stream";
import type { Duplex } from "node:stream";
import type { Context, Hono } from "hono";
import { z } from "zod";
import { badRequest, notFound } from "../../http/errors.ts";
import {
  allowedSetCookies,
  CONSOLE_ORIGIN_CONTENT_HEADERS,
  parseTenantHost,
  TENANT_PATHS,
  tenantHostsForApiClients,
  tenantOrigin,
  withAllowedSetCookies,
  withoutPlatformCookies,
} from "../../http/tenant-hosts.ts";
import type { AppEnv } from "../../http/principal.ts";
import type { Router } from "../../http/route.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { PortRefused } from "../driver/port-connect.ts";
import { dataplaneError } from "../dataplane/dataplane-error.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import { findSandbox, getSandbox, type SandboxRow } from "../store/sandbox-store.ts";
import { signLink, verifyLink, type LinkClaims } from "./signed-links.ts";

/**
 * Service URLs: an HTTP (and WebSocket) service listening on a port inside a sandbox, reachable at
 * `{server}/sandboxes/service/{sandbox id}/{port}/…` with a short-lived token in the
 * `X-Langsmith-Sandbox-Service-Token` header (LangSmith Deployment's header), or a cookie set by the
 * `browser_url`. Each connection is opened on the sandbox's own loopback by the driver; a stopped
 * sandbox is started first.
 */
export const SERVICE_PREFIX = TENANT_PATHS.service;
export const SERVICE_TOKEN_HEADER = "x-langsmith-sandbox-service-token";
const PURPOSE = "service";
const COOKIE = "wharf_sandbox_service"; // one of the tenant hosts' PLATFORM_COOKIES
/** Ports the egress proxy owns inside every sandbox: never a user's service. */
const RESERVED_PORTS = new Set([53, 80, 443, 3128]);
// Hop-by-hop headers, and Wharf's own credentials: a service in a sandbox never sees a platform key.
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  SERVICE_TOKEN_HEADER,
  "x-api-key",
  "x-tenant-id",
  "x-wharf-csrf",
]);

interface ServiceClaims extends LinkClaims {
  port: number;
}

const serviceUrlBody = z.object({
  port: z.number().int().min(1).max(65535),
  expires_in_seconds: z.number().int().min(1).max(86400).default(600),
});

export function registerServiceUrlRoute(router: Router, ctx: PlatformContext): void {
  router.add({
    method: "post",
    path: "/sandboxes/boxes/:name/service-url",
    summary:
      "A short-lived URL for an HTTP/WebSocket service on a port inside the sandbox (wakes a stopped sandbox on use)",
    tags: ["sandboxes"],
    params: z.object({ name: z.string().min(1).max(200) }),
    body: serviceUrlBody,
    responses: {
      200: { description: "{token, browser_url, service_url, expires_at}", schema: z.record(z.string(), z.unknown()) },
      404: { description: "Not found" },
    },
    handler: async ({ c, principal, params, body }) => {
      const row = await findSandbox(ctx.db, principal.workspaceId, params.name);
      if (!row) throw notFound("Sandbox");
      if (RESERVED_PORTS.has(body.port))
        throw badRequest(`Port ${body.port} is reserved for the sandbox's egress proxy`);
      const exp = Math.floor(Date.now() / 1000) + body.expires_in_seconds;
      const token = signLink(ctx.box, PURPOSE, { s: row.id, w: row.workspace_id, e: exp, port: body.port });
      // Browsers get the service on its own origin; API clients too unless the domain is `localhost`.
      const domain = ctx.config.settings.WHARF_TENANT_DOMAIN;
      const ownOrigin = tenantOrigin({ kind: "service", sandboxId: row.id, port: body.port }, domain, ctx.baseUrl());
      const serviceUrl = tenantHostsForApiClients(domain)
        ? ownOrigin
        : `${ctx.baseUrl()}${SERVICE_PREFIX}/${row.id}/${body.port}`;
      return c.json({
        token,
        service_url: serviceUrl,
        browser_url: `${ownOrigin}/?__wharf_service_token=${encodeURIComponent(token)}`,
        expires_at: new Date(exp * 1000).toISOString(),
      });
    },
  });
}

function cookieToken(cookie: string | undefined): string | null {
  for (const part of (cookie ?? "").split(";")) {
    const [k, ...v] = part.trim().split("=");
    if (k === COOKIE) return decodeURIComponent(v.join("="));
  }
  return null;
}

/** The sandbox a request may reach, woken up; throws 401/404 otherwise. */
async function authorize(
  ctx: PlatformContext,
  manager: SandboxManager,
  id: string,
  port: number,
  token: string | null,
): Promise<SandboxRow> {
  const claims = token ? verifyLink<ServiceClaims>(ctx.box, PURPOSE, token) : null;
  if (!claims || claims.s !== id || claims.port !== port)
    throw dataplaneError(401, "Unauthorized", `Send a valid service token in the ${SERVICE_TOKEN_HEADER} header`);
  const row = await getSandbox(ctx.db, id);
  if (!row || row.workspace_id !== claims.w) throw dataplaneError(404, "NotFound", "Sandbox not found");
  const awake = await manager.wake(row);
  manager.requireLive(awake);
  return awake;
}

async function connect(manager: SandboxManager, row: SandboxRow, port: number): Promise<net.Socket> {
  try {
    return await manager.driver!.connectPort(manager.requireLive(row).ref, port);
  } catch (err) {
    if (err instanceof PortRefused) throw dataplaneError(502, "ConnectionError", err.message);
    throw err;
  }
}

/** Whether a request reached a service on the service's own host (else on the console's origin). */
function onOwnHost(host: string | undefined, domain: string): boolean {
  const t = parseTenantHost(host, domain);
  return t !== null && t !== "unknown" && t.kind === "service";
}

export function serveServiceUrls(app: Hono<AppEnv>, ctx: PlatformContext, manager: SandboxManager): void {
  const domain = ctx.config.settings.WHARF_TENANT_DOMAIN;
  const proxy = async (c: Context<AppEnv>) => {
    const id = c.req.param("id")!;
    const port = Number(c.req.param("port"));
    if (!Number.isInteger(port) || port < 1 || port > 65535) throw dataplaneError(404, "NotFound", "No such service");
    const url = new URL(c.req.url);
    const queryToken = url.searchParams.get("__wharf_service_token");
    const base = `${SERVICE_PREFIX}/${id}/${port}`;
    const ownHost = onOwnHost(c.req.header("host"), domain);
    if (queryToken) {
      // browser_url: check the token, keep it in a cookie for this service's path, drop it from the URL.
      await authorize(ctx, manager, id, port, queryToken);
      url.searchParams.delete("__wharf_service_token");
      const secure = url.protocol === "https:" ? "; Secure" : "";
      c.header(
        "Set-Cookie",
        `${COOKIE}=${encodeURIComponent(queryToken)}; Path=${ownHost ? "/" : `${base}/`}; HttpOnly; SameSite=Lax${secure}`,
      );
      return c.redirect((ownHost ? url.pathname.slice(base.length) || "/" : url.pathname) + url.search, 302);
    }
    const row = await authorize(
      ctx,
      manager,
      id,
      port,
      c.req.header(SERVICE_TOKEN_HEADER) ?? cookieToken(c.req.header("cookie")),
    );
    manager.touch(row.id);
    const socket = await connect(manager, row, port);
    const headers: Record<string, string> = {};
    c.req.raw.headers.forEach((v, k) => {
      if (!HOP_BY_HOP.has(k)) headers[k] = v;
    });
    headers.host = `localhost:${port}`;
    // The service never sees its own access token, nor the console's session.
    const cookie = headers.cookie ? withoutPlatformCookies(headers.cookie) : null;
    if (cookie) headers.cookie = cookie;
    else delete headers.cookie;
    const path = (url.pathname.slice(base.length) || "/") + url.search;
    const hasBody = !["GET", "HEAD"].includes(c.req.method) && c.req.raw.body;
    // One request per connection: the socket was opened for it inside the sandbox.
    const upstream = http.request({ method: c.req.method, path, headers, createConnection: () => socket });
    const answered = new Promise<http.IncomingMessage>((resolve, reject) => {
      upstream.on("response", resolve);
      upstream.on("error", reject);
    });
    if (hasBody)
      Readable.fromWeb(c.req.raw.body as never)
        .on("error", (err) => upstream.destroy(err))
        .pipe(upstream);
    else upstream.end();
    let res: http.IncomingMessage;
    try {
      res = await answered;
    } catch (err) {
      socket.destroy();
      throw dataplaneError(
        502,
        "ConnectionError",
        `The service on port ${port} did not answer: ${(err as Error).message}`,
      );
    }
    const out = new Headers();
    for (const [k, v] of Object.entries(res.headers)) {
      if (HOP_BY_HOP.has(k) || k === "set-cookie" || v === undefined) continue;
      for (const one of Array.isArray(v) ? v : [v]) out.append(k, one);
    }
    for (const one of allowedSetCookies(res.headers["set-cookie"] ?? [], !ownHost)) out.append("set-cookie", one);
    if (!ownHost) for (const [k, v] of Object.entries(CONSOLE_ORIGIN_CONTENT_HEADERS)) out.set(k, v);
    const status = res.statusCode ?? 502;
    if (c.req.method === "HEAD" || status === 204 || status === 304) {
      res.resume();
      return new Response(null, { status, headers: out });
    }
    return new Response(Readable.toWeb(res) as ReadableStream, { status, headers: out });
  };
  app.all(`${SERVICE_PREFIX}/:id/:port`, proxy);
  app.all(`${SERVICE_PREFIX}/:id/:port/*`, proxy);
}

/** Largest upgrade response head a service may send. */
const MAX_HEAD = 64 * 1024;

/**
 * Splices a service's upgrade answer to the client: its head first, with the Set-Cookie lines the
 * platform does not allow dropped (browsers honour them on a 101 too), then the raw bytes.
 */
function spliceWithAllowedCookies(upstream: net.Socket, socket: Duplex, onConsoleOrigin: boolean): void {
  let buf = Buffer.alloc(0);
  const onData = (d: Buffer) => {
    buf = Buffer.concat([buf, d]);
    const end = buf.indexOf("\r\n\r\n");
    if (end < 0) {
      if (buf.length > MAX_HEAD) upstream.destroy();
      return;
    }
    upstream.off("data", onData);
    upstream.pause();
    socket.write(withAllowedSetCookies(buf.subarray(0, end + 4).toString("latin1"), onConsoleOrigin), "latin1");
    if (buf.length > end + 4) socket.write(buf.subarray(end + 4));
    upstream.pipe(socket);
  };
  upstream.on("data", onData);
  socket.pipe(upstream);
}

const UPGRADE_PATH = new RegExp(`^${SERVICE_PREFIX}/([^/]+)/(\\d+)(/.*)?$`);

/** WebSocket (and any other HTTP upgrade) to a service: the raw bytes are spliced after the handshake is forwarded. */
export function proxyServiceUpgrades(server: http.Server, ctx: PlatformContext, manager: SandboxManager): void {
  server.on("upgrade", (req: http.IncomingMessage, socket: Duplex, head: Buffer) => {
    const [pathname, search = ""] = (req.url ?? "").split(/\?(.*)/s);
    const m = UPGRADE_PATH.exec(pathname);
    if (!m) return; // someone else's upgrade
    socket.on("error", () => socket.destroy()); // the client went away mid-handshake: nothing to keep
    void (async () => {
      try {
        const port = Number(m[2]);
        const token = (req.headers[SERVICE_TOKEN_HEADER] as string | undefined) ?? cookieToken(req.headers.cookie);
        const row = await authorize(ctx, manager, m[1], port, token);
        manager.touch(row.id);
        const upstream = await connect(manager, row, port);
        const lines = [`${req.method} ${m[3] || "/"}${search ? `?${search}` : ""} HTTP/1.1`, `Host: localhost:${port}`];
        for (let i = 0; i < req.rawHeaders.length; i += 2) {
          const k = req.rawHeaders[i].toLowerCase();
          if (HOP_BY_HOP.has(k) && k !== "connection" && k !== "upgrade") continue;
          const value = k === "cookie" ? withoutPlatformCookies(req.rawHeaders[i + 1]) : req.rawHeaders[i + 1];
          if (value) lines.push(`${req.rawHeaders[i]}: ${value}`);
        }
        upstream.write(`${lines.join("\r\n")}\r\n\r\n`);
        if (head.length) upstream.write(head);
        spliceWithAllowedCookies(
          upstream,
          socket,
          !onOwnHost(req.headers.host, ctx.config.settings.WHARF_TENANT_DOMAIN),
        );
        const end = () => {
          upstream.destroy();
          socket.destroy();
        };
        upstream.on("error", end);
        socket.on("close", end);
        upstream.on("close", end);
      } catch (err) {
        const e = err as { status?: number; detail?: unknown };
        const status = e.status ?? 502;
        const body = JSON.stringify({ detail: e.detail ?? "Bad gateway" });
        if (!e.status) ctx.log.warn({ err }, "service upgrade failed");
        socket.end(
          `HTTP/1.1 ${status} Error\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
      }
    })();
  });
}
