import { HttpError } from "../../http/errors.ts";
import type { AgentServerContext } from "../context.ts";
import { STUDIO_USER, type AuthContext } from "./custom-auth.ts";
import { AgentError } from "../errors.ts";

/** Paths answered without credentials: health and server info (as the LangGraph server does for /info). */
export const PUBLIC_PATHS = new Set(["/ok", "/info"]);

async function platformUser(ctx: AgentServerContext, req: Request): Promise<AuthContext> {
  try {
    const p = await ctx.authenticate!(req.headers);
    return {
      scopes: [],
      user: {
        identity: p.userId,
        display_name: p.userId,
        permissions: [],
        is_authenticated: true,
        workspace_id: p.workspaceId,
      },
    };
  } catch (err) {
    if (err instanceof HttpError)
      throw new AgentError(err.status, typeof err.detail === "string" ? err.detail : err.message, err.headers);
    throw err;
  }
}

/**
 * Who is calling. With a custom auth handler, the handler decides (Studio requests, marked with
 * `x-auth-scheme: langsmith`, get the Studio user instead, but only with a valid platform key or in
 * `wharf dev`). Without one, a platform API key is required, except in `wharf dev`.
 */
export async function resolveAuth(ctx: AgentServerContext, req: Request): Promise<AuthContext | null> {
  const custom = ctx.customAuth;
  if (custom?.hasAuthenticate) {
    if (!custom.disableStudioAuth && req.headers.get("x-auth-scheme") === "langsmith") {
      if (!ctx.open) {
        if (!ctx.authenticate) throw new AgentError(401, "Unauthorized");
        await platformUser(ctx, req);
      }
      return { user: STUDIO_USER, scopes: [] };
    }
    return custom.authenticate(req, (err) =>
      ctx.log.error({ err, handler: custom.where }, "custom auth handler failed; answering 401"),
    );
  }
  if (ctx.open) return null;
  if (!ctx.authenticate) throw new AgentError(401, "Unauthorized");
  return platformUser(ctx, req);
}
