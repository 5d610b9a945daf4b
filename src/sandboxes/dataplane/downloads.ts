import type { Context, Hono } from "hono";
import { z } from "zod";
import { notFound } from "../../http/errors.ts";
import {
  CONSOLE_ORIGIN_CONTENT_HEADERS,
  parseTenantHost,
  TENANT_PATHS,
  tenantHostsForApiClients,
  tenantOrigin,
} from "../../http/tenant-hosts.ts";
import type { AppEnv } from "../../http/principal.ts";
import type { Router } from "../../http/route.ts";
import { webStreamOf } from "../../http/web-stream.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { SANDBOX_USER } from "../../confinement/index.ts";
import { dataplaneError } from "./dataplane-error.ts";
import type { SandboxManager } from "../lifecycle/manager.ts";
import { findSandbox, getSandbox, type SandboxRow } from "../store/sandbox-store.ts";
import { signLink, verifyLink, type LinkClaims } from "../links/signed-links.ts";

// Run as the sandbox user, inside the sandbox: paths and symlinks resolve in its own root.
const STAT = `p=$1; [ -e "$p" ] || exit 2; [ -d "$p" ] && exit 21; [ -r "$p" ] || exit 13; stat -L -c '%s %Y %i' -- "$p"`;
const READ = `exec tail -c +$(($2 + 1)) -- "$1" | head -c "$3"`;

/** 128 + SIGXFSZ: the write went past the sandbox's `fs_capacity_bytes` (RLIMIT_FSIZE). */
const FILE_TOO_LARGE = 128 + 25;

export function fileError(kind: "WriteError" | "ReadError", path: string, code: number, stderr: string): never {
  if (code === FILE_TOO_LARGE || /file too large|no space left/i.test(stderr))
    throw dataplaneError(413, kind, `${path} would exceed the sandbox's fs_capacity_bytes`);
  if (code === 2) throw dataplaneError(404, "FileNotFound", `File not found: ${path}`);
  if (code === 21) throw dataplaneError(400, kind, `${path} is a directory`);
  if (code === 13 || /permission denied/i.test(stderr)) throw dataplaneError(403, kind, `Permission denied: ${path}`);
  throw dataplaneError(
    400,
    kind,
    `${kind === "WriteError" ? "Cannot write" : "Cannot read"} ${path}: ${stderr.trim().slice(0, 300) || `exit ${code}`}`,
  );
}

export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | "invalid" | null {
  if (!header) return null;
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === "" && m[2] === "")) return "invalid";
  let start: number, end: number;
  if (m[1] === "") {
    start = Math.max(0, size - Number(m[2]));
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === "" ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start >= size || start > end) return "invalid";
  return { start, end };
}

export interface ServeOptions {
  contentType?: string;
  disposition?: "attachment" | "inline";
  /** Added to every answer (the console origin's content headers). */
  headers?: Readonly<Record<string, string>>;
}

/** Types a browser would run or render as an active document (scripts, markup, PDF): never on the console's origin. */
const ACTIVE_TYPES = /html|xml|svg|javascript|ecmascript|pdf|multipart/i;

/**
 * What a download link's creator asked for, as served on the console's origin: always an
 * attachment, and a type no browser renders as a document of that origin.
 */
export function consoleOriginDownload(opts: { contentType?: string; disposition?: "attachment" | "inline" }): {
  contentType?: string;
  disposition: "attachment";
} {
  const t = opts.contentType;
  return {
    contentType: t === undefined || !ACTIVE_TYPES.test(t) ? t : "application/octet-stream",
    disposition: "attachment",
  };
}

/**
 * Serves one file of a sandbox: GET and HEAD, `Range` (206/416), a strong `ETag` from size, mtime
 * and inode with `If-Range` and `If-None-Match` (304), streamed with backpressure.
 */
export async function serveFile(
  c: Context<AppEnv>,
  manager: SandboxManager,
  row: SandboxRow,
  path: string,
  opts: ServeOptions = {},
): Promise<Response> {
  let statText = "";
  const st = await manager.runWithInput(
    row,
    ["/bin/sh", "-c", STAT, "sh", path],
    null,
    (b) => (statText += b.toString()),
  );
  if (st.code !== 0) fileError("ReadError", path, st.code, st.stderr);
  const [size, mtime, inode] = statText.trim().split(" ").map(Number);
  const etag = `"${size.toString(16)}-${mtime.toString(16)}-${(inode || 0).toString(16)}"`;
  const headers: Record<string, string> = {
    ...opts.headers,
    "X-Content-Type-Options": "nosniff",
    "Content-Type": opts.contentType ?? "application/octet-stream",
    "Accept-Ranges": "bytes",
    ETag: etag,
    "Last-Modified": new Date(mtime * 1000).toUTCString(),
  };
  if (opts.disposition)
    headers["Content-Disposition"] =
      `${opts.disposition}; filename="${(path.split("/").pop() || "file").replace(/["\\\r\n]/g, "_")}"`;
  const noneMatch = c.req.header("if-none-match");
  if (noneMatch && noneMatch.split(",").some((t) => t.trim() === etag || t.trim() === "*"))
    return c.body(null, 304, headers);
  const ifRange = c.req.header("if-range");
  // A stale If-Range means the file changed: send it whole, the client restarts.
  const range = ifRange && ifRange !== etag ? null : parseRange(c.req.header("range"), size);
  if (range === "invalid") return c.body(null, 416, { ...opts.headers, "Content-Range": `bytes */${size}` });
  const start = range?.start ?? 0;
  const length = range ? range.end - range.start + 1 : size;
  headers["Content-Length"] = String(length);
  if (range) headers["Content-Range"] = `bytes ${range.start}-${range.end}/${size}`;
  const status = range ? 206 : 200;
  if (c.req.method === "HEAD" || length === 0) return c.body(null, status, headers);
  const live = manager.requireLive(row);
  const proc = manager.driver!.exec(row.id, live.ref, {
    argv: ["/bin/sh", "-c", READ, "sh", path, String(start), String(length)],
    env: live.env,
    cwd: SANDBOX_USER.home,
  });
  proc.stdin.end();
  proc.stderr.resume();
  return c.body(
    webStreamOf(proc.stdout, () => proc.kill()),
    status,
    headers,
  );
}

const PURPOSE = "download";
export const DOWNLOAD_LINK_PREFIX = TENANT_PATHS.download;

interface DownloadClaims extends LinkClaims {
  p: string;
  t?: string;
  d?: "attachment" | "inline";
}

const downloadUrlBody = z.object({
  path: z
    .string()
    .min(1)
    .max(4096)
    .refine((p) => !p.includes("\0"), "Paths cannot contain NUL"),
  expires_in_seconds: z
    .number()
    .int()
    .min(1)
    .max(10 * 365 * 24 * 3600)
    .optional(),
  content_type: z
    .string()
    .max(255)
    .regex(/^[\x20-\x7e]+$/, "A printable MIME type")
    .optional(),
  content_disposition: z.enum(["attachment", "inline"]).optional(),
});

/**
 * `POST /v2/sandboxes/boxes/{name}/download-url` mints a link to one file that works without a
 * credential (`{download_url, token, expires_at}`); `GET|HEAD /sandboxes/download/{token}` serves
 * it, waking a stopped sandbox first. The link names a path, not content.
 */
export function serveDownloadLinks(app: Hono<AppEnv>, ctx: PlatformContext, manager: SandboxManager): void {
  const domain = ctx.config.settings.WHARF_TENANT_DOMAIN;
  const serve = async (c: Context<AppEnv>) => {
    const claims = verifyLink<DownloadClaims>(ctx.box, PURPOSE, c.req.param("token")!);
    if (!claims) throw dataplaneError(401, "Unauthorized", "The download link is invalid or has expired");
    const host = parseTenantHost(c.req.header("host"), domain);
    // A sandbox's download host serves that sandbox's files only.
    if (host !== null && (host === "unknown" || host.kind !== "download" || host.sandboxId !== claims.s))
      throw dataplaneError(404, "NotFound", "Sandbox not found");
    const row = await getSandbox(ctx.db, claims.s);
    if (!row || row.workspace_id !== claims.w) throw dataplaneError(404, "NotFound", "Sandbox not found");
    const asked = { contentType: claims.t, disposition: claims.d };
    const opts: ServeOptions =
      host === null ? { ...consoleOriginDownload(asked), headers: CONSOLE_ORIGIN_CONTENT_HEADERS } : asked;
    return serveFile(c, manager, await manager.wake(row), claims.p, opts);
  };
  app.get(`${DOWNLOAD_LINK_PREFIX}/:token`, serve);
  app.on("HEAD", `${DOWNLOAD_LINK_PREFIX}/:token`, serve);
}

export function registerDownloadUrlRoute(router: Router, ctx: PlatformContext): void {
  router.add({
    method: "post",
    path: "/sandboxes/boxes/:name/download-url",
    summary:
      "Create a link that downloads one file from the sandbox without a credential (GET, HEAD, Range; wakes a stopped sandbox)",
    tags: ["sandboxes"],
    params: z.object({ name: z.string().min(1).max(200) }),
    body: downloadUrlBody,
    responses: {
      200: { description: "{download_url, token, expires_at}", schema: z.record(z.string(), z.unknown()) },
      404: { description: "Not found" },
    },
    handler: async ({ c, principal, params, body }) => {
      const row = await findSandbox(ctx.db, principal.workspaceId, params.name);
      if (!row) throw notFound("Sandbox");
      const path = body.path.startsWith("/") ? body.path : `${SANDBOX_USER.home}/${body.path}`;
      // A link needs no credential: unless asked otherwise it lives an hour (the operator's choice), not forever.
      const ttl = body.expires_in_seconds ?? (ctx.config.settings.WHARF_SANDBOX_DOWNLOAD_LINK_TTL_SECONDS || null);
      const exp = ttl === null ? null : Math.floor(Date.now() / 1000) + ttl;
      const claims: DownloadClaims = { s: row.id, w: row.workspace_id, e: exp, p: path };
      if (body.content_type) claims.t = body.content_type;
      if (body.content_disposition) claims.d = body.content_disposition;
      const token = signLink(ctx.box, PURPOSE, claims);
      const domain = ctx.config.settings.WHARF_TENANT_DOMAIN;
      const base = tenantHostsForApiClients(domain)
        ? tenantOrigin({ kind: "download", sandboxId: row.id }, domain, ctx.baseUrl())
        : `${ctx.baseUrl()}${DOWNLOAD_LINK_PREFIX}`;
      return c.json({
        download_url: `${base}/${token}`,
        token,
        expires_at: exp === null ? null : new Date(exp * 1000).toISOString(),
      });
    },
  });
}
