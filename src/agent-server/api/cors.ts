import type { CorsConfig } from "../project/project.ts";

const DEFAULT_EXPOSE = ["content-location", "x-pagination-total"];
const DEFAULT_METHODS = "GET,HEAD,PUT,POST,DELETE,PATCH";

/** The origin to allow for a request under `http.cors` (null: none), as Hono's `cors()` decides. */
export function allowedOrigin(cfg: CorsConfig | null, origin: string | null): string | null {
  if (!cfg) return "*";
  if (cfg.allow_origin_regex) return origin && new RegExp(cfg.allow_origin_regex).test(origin) ? origin : null;
  const list = cfg.allow_origins ?? [];
  if (list.includes("*")) return "*";
  return origin && list.includes(origin) ? origin : null;
}

/**
 * The CORS headers of a response (and, for a preflight, of the 204), as the LangGraph server sends
 * them: any origin with `content-location` and `x-pagination-total` exposed unless `http.cors`
 * says otherwise (those two are always exposed: the SDK reads them).
 */
export function corsHeaders(
  cfg: CorsConfig | null,
  req: { origin: string | null; preflight: boolean; requestHeaders: string | null },
): Record<string, string> {
  const out: Record<string, string> = {};
  const origin = allowedOrigin(cfg, req.origin);
  if (origin) out["access-control-allow-origin"] = origin;
  if (origin && origin !== "*") out.vary = "Origin";
  if (cfg?.allow_credentials) out["access-control-allow-credentials"] = "true";
  const expose = new Set([...(cfg?.expose_headers ?? []).map((h) => h.toLowerCase()), ...DEFAULT_EXPOSE]);
  if (!req.preflight) {
    out["access-control-expose-headers"] = [...expose].join(",");
    return out;
  }
  if (cfg?.max_age !== undefined) out["access-control-max-age"] = String(cfg.max_age);
  out["access-control-allow-methods"] = cfg?.allow_methods?.length ? cfg.allow_methods.join(",") : DEFAULT_METHODS;
  const headers = cfg?.allow_headers?.length ? cfg.allow_headers.join(",") : req.requestHeaders;
  if (headers) {
    out["access-control-allow-headers"] = headers;
    if (!cfg?.allow_headers?.length)
      out.vary = out.vary ? `${out.vary}, Access-Control-Request-Headers` : "Access-Control-Request-Headers";
  }
  return out;
}
