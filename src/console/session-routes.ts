import type { Context, Hono } from "hono";
import { z } from "zod";
import { HttpError, forbidden } from "../http/errors.ts";
import type { AppEnv } from "../http/principal.ts";
import type { PlatformContext } from "../platform/context.ts";
import { csrfTokenFor, cookieRequestRefusal } from "./csrf.ts";
import {
  SESSION_COOKIE,
  SESSION_COOKIE_PATHS,
  closeSession,
  openSession,
  resolveSession,
  sessionCookieOf,
} from "./sessions.ts";

const signInBody = z.union([
  z.object({ api_key: z.string().min(1).max(500) }).strict(),
  z.object({ token: z.string().min(1).max(8000) }).strict(),
]);

/**
 * Sets (or, with an empty value, clears) the session cookie on each of the console's paths; the
 * `Path=/` cookie earlier versions set is cleared either way.
 */
function setCookies(c: Context<AppEnv>, value: string, maxAge: number): void {
  const https = new URL(c.req.url).protocol === "https:" || c.req.header("x-forwarded-proto") === "https";
  const attrs = `HttpOnly; SameSite=Strict${https ? "; Secure" : ""}`;
  for (const p of SESSION_COOKIE_PATHS)
    c.header("Set-Cookie", `${SESSION_COOKIE}=${value}; Path=${p}; ${attrs}; Max-Age=${maxAge}`, { append: true });
  c.header("Set-Cookie", `${SESSION_COOKIE}=; Path=/; ${attrs}; Max-Age=0`, { append: true });
}

function sessionBody(value: string, owner: { userId: string; workspaceId: string; expiresAt: string }) {
  return {
    user_id: owner.userId,
    workspace_id: owner.workspaceId,
    expires_at: owner.expiresAt,
    csrf_token: csrfTokenFor(value),
  };
}

async function readSignIn(c: Context<AppEnv>): Promise<z.infer<typeof signInBody>> {
  if (!(c.req.header("content-type") ?? "").toLowerCase().startsWith("application/json")) {
    // A JSON content type cannot be sent cross-site without a preflight: no login CSRF by form post.
    throw new HttpError(415, "Send the credential as application/json");
  }
  let raw: unknown;
  try {
    raw = await c.req.json();
  } catch {
    throw new HttpError(422, [{ loc: ["body"], msg: "Malformed JSON", type: "json_invalid" }]);
  }
  const parsed = signInBody.safeParse(raw);
  if (!parsed.success)
    throw new HttpError(422, [{ loc: ["body"], msg: "Send exactly one of api_key or token", type: "value_error" }]);
  return parsed.data;
}

/**
 * The console's session: `POST` exchanges an API key or bearer token for an HttpOnly,
 * SameSite=Strict cookie (the credential is checked by the platform's own authenticator, then
 * forgotten); `GET` tells the page who it is and its CSRF token; `DELETE` signs out.
 */
export function mountSessionRoutes(app: Hono<AppEnv>, ctx: PlatformContext): void {
  app.post("/console/api/session", async (c) => {
    const refusal = cookieRequestRefusal({ method: "GET", headers: c.req.raw.headers, sessionValue: "" });
    if (refusal) throw forbidden(refusal);
    const body = await readSignIn(c);
    const headers = new Headers();
    if ("api_key" in body) headers.set("x-api-key", body.api_key);
    else headers.set("authorization", `Bearer ${body.token}`);
    const principal = await ctx.authenticate(headers, "POST");
    let notAfter: string | undefined;
    if ("token" in body) {
      // The session never outlives the token it was opened with.
      const exp = JSON.parse(Buffer.from(body.token.split(".")[1] ?? "", "base64url").toString() || "{}") as {
        exp?: number;
      };
      if (typeof exp.exp === "number") notAfter = new Date(exp.exp * 1000).toISOString();
    }
    const scheme = principal.scheme === "bearer" ? "bearer" : "api_key";
    const opened = await openSession(ctx.db, {
      userId: principal.userId,
      workspaceId: principal.workspaceId,
      apiKeyId: principal.apiKeyId,
      scheme,
      notAfter,
    });
    const maxAge = Math.max(0, Math.floor((Date.parse(opened.expiresAt) - Date.now()) / 1000));
    ctx.log.info(
      { userId: principal.userId, workspaceId: principal.workspaceId, via: scheme, apiKeyId: principal.apiKeyId },
      "console sign-in",
    );
    setCookies(c, opened.value, maxAge);
    c.header("Cache-Control", "no-store");
    return c.json(sessionBody(opened.value, { ...principal, expiresAt: opened.expiresAt }), 201);
  });

  app.get("/console/api/session", async (c) => {
    c.header("Cache-Control", "no-store");
    const value = sessionCookieOf(c.req.header("cookie") ?? null);
    const owner = value ? await resolveSession(ctx.db, value) : null;
    // Nobody signed in is an answer, not an error: a first visit should not log a failed request.
    if (!value || !owner) return c.body(null, 204);
    return c.json(sessionBody(value, owner));
  });

  app.delete("/console/api/session", async (c) => {
    const value = sessionCookieOf(c.req.header("cookie") ?? null);
    if (value) {
      const refusal = cookieRequestRefusal({ method: "DELETE", headers: c.req.raw.headers, sessionValue: value });
      if (refusal) throw forbidden(refusal);
      await closeSession(ctx.db, value);
    }
    setCookies(c, "", 0);
    return c.body(null, 204);
  });
}
