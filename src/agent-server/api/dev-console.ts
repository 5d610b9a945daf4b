import type { Hono } from "hono";
import { mountStaticConsole } from "../../console/index.ts";
import type { AgentEnv } from "../context.ts";

/**
 * `wharf dev` serves the console's Studio at `/console/` for the project it runs: the page asks
 * `/console/api/session`, hears `{"local": true}` and shows only the Studio, talking to this same
 * origin without credentials (the server is open, on loopback). Registered before the API's
 * authentication, since the page's own files need none.
 */
export function registerDevConsole(app: Hono<AgentEnv>): void {
  app.get("/console/api/session", (c) => c.json({ local: true }, 200, { "cache-control": "no-store" }));
  mountStaticConsole(app, undefined, { redirectRoot: false });
}
