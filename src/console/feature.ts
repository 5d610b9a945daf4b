import type { Feature } from "../platform/context.ts";
import { mountSessionRoutes } from "./session-routes.ts";
import { mountStaticConsole } from "./static-files.ts";

/** The web console at `/console` and its session endpoints (`/console/api/session`). */
export function createConsoleFeature(options: { dist?: string } = {}): Feature {
  return {
    name: "console",
    rootRoutes(app, ctx) {
      mountSessionRoutes(app, ctx);
      mountStaticConsole(app, options.dist);
    },
  };
}
