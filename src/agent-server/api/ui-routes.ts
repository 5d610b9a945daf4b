import type { Hono } from "hono";
import { z } from "zod";
import type { AgentEnv, AgentServerContext } from "../context.ts";
import { AgentError } from "../errors.ts";
import { CORS_HEADERS } from "../wire.ts";
import { body } from "./route-helpers.ts";
import { uiGlobalName } from "../project/ui-bundles.ts";

// Current SDKs send only `name` and fill in the `{{shadowRootId}}` placeholder themselves, as the
// LangGraph server writes it; older ones send the id.
const uiRequest = z.looseObject({ name: z.string().min(1), shadowRootId: z.string().min(1).optional() });
const MIME: Record<string, string> = {
  ".js": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".map": "application/json",
};
const ext = (name: string) => name.slice(name.lastIndexOf("."));
// Only what can end or alter a single-quoted attribute; `"` stays as the LangGraph server writes it.
const escapeAttribute = (text: string) => text.replace(/[&']/g, (ch) => (ch === "&" ? "&amp;" : "&#39;"));

/**
 * `ui` of `langgraph.json` as the LangGraph server serves it: `POST /ui/{graph}` answers the HTML
 * that loads the bundle (stylesheets, then the script calling `render(name, shadowRootId)`), and
 * `GET /ui/{graph}/{file}` the built files (no authentication, as there).
 */
export function registerUiRoutes(app: Hono<AgentEnv>, ctx: AgentServerContext): void {
  app.post("/ui/:agent", async (c) => {
    const agent = c.req.param("agent");
    const b = await body(c, uiRequest);
    const files = ctx.ui.get(agent);
    if (!files?.length) throw new AgentError(404, `UI not found for agent "${agent}"`);
    const base = `http://${c.req.header("host") ?? "localhost"}/ui/${agent}`;
    const html: string[] = [];
    for (const css of files.filter((f) => f.basename.endsWith(".css")))
      html.push(`<link rel="stylesheet" href="${base}/${css.basename}" />`);
    const js = files.find((f) => f.basename.endsWith(".js"));
    // The call sits in a single-quoted attribute: the caller's name and root id are escaped for it.
    const onload = escapeAttribute(
      `${uiGlobalName(agent)}.render(${JSON.stringify(b.name)}, ${JSON.stringify(b.shadowRootId ?? "{{shadowRootId}}")})`,
    );
    if (js) html.push(`<script src="${base}/${js.basename}" onload='${onload}'></script>`);
    return new Response(html.join("\n"), { headers: { ...CORS_HEADERS, "content-type": "text/html" } });
  });

  app.get("/ui/:agent/:basename", (c) => {
    const file = ctx.ui.get(c.req.param("agent"))?.find((f) => f.basename === c.req.param("basename"));
    if (!file) throw new AgentError(404, "File not found");
    return new Response(file.contents as Uint8Array<ArrayBuffer>, {
      headers: { ...CORS_HEADERS, "content-type": MIME[ext(file.basename)] ?? "text/plain" },
    });
  });
}
