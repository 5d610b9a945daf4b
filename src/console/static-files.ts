import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";
import { fileURLToPath } from "node:url";
import type { Context, Env, Hono } from "hono";
import type { AppEnv } from "../http/principal.ts";

/** Where `vite build` (run by `npm install`) puts the console. */
export const CONSOLE_DIST = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../console/dist");

/**
 * No inline script anywhere (Vite emits module files only); inline styles stay allowed because
 * xterm.js sizes its rows with them. Same-origin `connect-src` covers fetch, SSE and the terminal's
 * WebSocket.
 */
export const CONSOLE_CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data: blob:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join("; ");

const TYPES: Record<string, string> = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".svg": "image/svg+xml",
  ".png": "image/png",
  ".ico": "image/x-icon",
  ".json": "application/json",
  ".woff2": "font/woff2",
};

interface Asset {
  body: Buffer;
  gzip: Buffer | null;
  type: string;
}

/** Files are read once and gzipped once: the bundle is immutable while the server runs. */
function loader(dist: string) {
  const cache = new Map<string, Asset | null>();
  return (rel: string): Asset | null => {
    if (cache.has(rel)) return cache.get(rel)!;
    const full = path.resolve(dist, rel);
    let asset: Asset | null = null;
    if (full.startsWith(dist + path.sep) && fs.existsSync(full) && fs.statSync(full).isFile()) {
      const body = fs.readFileSync(full);
      const type = TYPES[path.extname(full)] ?? "application/octet-stream";
      const gzip =
        /text|javascript|json|svg/.test(type) && body.length > 1024 ? zlib.gzipSync(body, { level: 9 }) : null;
      asset = { body, gzip, type };
    }
    cache.set(rel, asset);
    return asset;
  };
}

function send<E extends Env>(c: Context<E>, asset: Asset, immutable: boolean): Response {
  const headers: Record<string, string> = {
    "content-type": asset.type,
    "content-security-policy": CONSOLE_CSP,
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": immutable ? "public, max-age=31536000, immutable" : "no-cache",
    vary: "accept-encoding",
  };
  const gzipOk = asset.gzip && /\bgzip\b/.test(c.req.header("accept-encoding") ?? "");
  if (gzipOk) headers["content-encoding"] = "gzip";
  return new Response(c.req.method === "HEAD" ? null : new Uint8Array(gzipOk ? asset.gzip! : asset.body), { headers });
}

const MISSING = `The console is not built. Run \`npm install\` (it builds the console) or \`npm run build:console\`.`;

/**
 * `/console/assets/*` are Vite's hashed files (cached forever); every other `/console/…` path is the
 * single page (hash routing), and a browser's `GET /` is sent there.
 */
export function mountStaticConsole<E extends Env = AppEnv>(
  app: Hono<E>,
  dist = CONSOLE_DIST,
  options: { redirectRoot?: boolean } = {},
): void {
  const load = loader(dist);
  if (options.redirectRoot !== false)
    app.get("/", (c, next) =>
      /text\/html/.test(c.req.header("accept") ?? "") ? c.redirect("/console/", 302) : next(),
    );
  app.get("/console", (c) => c.redirect("/console/", 301));
  app.get("/console/*", (c) => {
    const rel = c.req.path.slice("/console/".length);
    if (rel.startsWith("api/")) return c.json({ detail: `Not found: ${c.req.method} ${c.req.path}` }, 404);
    if (rel.startsWith("assets/") || /^[\w.-]+\.(svg|png|ico)$/.test(rel)) {
      const asset = load(rel);
      return asset ? send(c, asset, rel.startsWith("assets/")) : c.json({ detail: `Not found: ${c.req.path}` }, 404);
    }
    const index = load("index.html");
    return index ? send(c, index, false) : c.text(MISSING, 503);
  });
}
