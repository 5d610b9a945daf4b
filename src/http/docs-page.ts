import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";
import type { Hono } from "hono";
import type { AppEnv } from "./principal.ts";

const require = createRequire(import.meta.url);

/** Interactive API docs served from the local swagger-ui-dist package: no CDN, works offline. */
export function mountDocs(app: Hono<AppEnv>, openapiPath: string): void {
  const dist = path.dirname(require.resolve("swagger-ui-dist/package.json"));
  const assets: Record<string, string> = {
    "swagger-ui.css": "text/css; charset=utf-8",
    "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
  };
  app.get("/docs", (c) =>
    c.html(`<!doctype html><html><head><meta charset="utf-8"><title>Wharf API</title>
<link rel="stylesheet" href="/docs/swagger-ui.css"></head><body><div id="ui"></div>
<script src="/docs/swagger-ui-bundle.js"></script>
<script>window.ui = SwaggerUIBundle({ url: ${JSON.stringify(openapiPath)}, dom_id: "#ui" });</script>
</body></html>`),
  );
  for (const [file, type] of Object.entries(assets)) {
    app.get(`/docs/${file}`, (c) => {
      c.header("Content-Type", type);
      c.header("Cache-Control", "public, max-age=86400");
      return c.body(fs.readFileSync(path.join(dist, file)));
    });
  }
}
