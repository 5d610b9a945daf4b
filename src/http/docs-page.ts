import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import type { Env, Hono } from "hono";

const require = createRequire(import.meta.url);

/**
 * `/docs` shares the console's origin: no inline script (the page's set-up is a file of its own),
 * nothing from elsewhere, never in a frame. Swagger UI styles some elements inline.
 */
export const DOCS_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join("; ");

const PAGE_HEADERS: Record<string, string> = {
  "Content-Security-Policy": DOCS_CSP,
  "X-Frame-Options": "DENY",
  "X-Content-Type-Options": "nosniff",
  "Referrer-Policy": "no-referrer",
};

/** Interactive API docs served from the local swagger-ui-dist package: no CDN, works offline. */
export function mountDocs<E extends Env>(app: Hono<E>, openapiPath: string, title = "Wharf API"): void {
  const dist = path.dirname(require.resolve("swagger-ui-dist/package.json"));
  const files: Record<string, { type: string; body: () => Uint8Array }> = {
    "swagger-ui.css": {
      type: "text/css; charset=utf-8",
      body: () => fs.readFileSync(path.join(dist, "swagger-ui.css")),
    },
    "swagger-ui-bundle.js": {
      type: "text/javascript; charset=utf-8",
      body: () => fs.readFileSync(path.join(dist, "swagger-ui-bundle.js")),
    },
    "init.js": {
      type: "text/javascript; charset=utf-8",
      body: () => Buffer.from(`window.ui = SwaggerUIBundle({ url: ${JSON.stringify(openapiPath)}, dom_id: "#ui" });\n`),
    },
  };
  app.get("/docs", (c) => {
    for (const [k, v] of Object.entries(PAGE_HEADERS)) c.header(k, v);
    return c.html(`<!doctype html><html><head><meta charset="utf-8"><title>${title.replace(/[<&]/g, "")}</title>
<link rel="stylesheet" href="/docs/swagger-ui.css"></head><body><div id="ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script src="/docs/init.js"></script>
</body></html>`);
  });
  for (const [file, { type, body }] of Object.entries(files)) {
    app.get(`/docs/${file}`, (c) => {
      for (const [k, v] of Object.entries(PAGE_HEADERS)) c.header(k, v);
      c.header("Content-Type", type);
      c.header("Cache-Control", "public, max-age=86400");
      return c.body(new Uint8Array(body()));
    });
  }
}
