import type { Principal } from "../../http/principal.ts";

/**
 * How the platform's proxy tells a confined agent server who is calling: the agent server cannot
 * check platform credentials itself (it has no view of the platform's database), so the proxy
 * checks them and passes the result. Clients never get to set it: the proxy drops any copy.
 */
export const PRINCIPAL_HEADER = "x-wharf-principal";

export function encodePrincipal(p: Principal): string {
  return Buffer.from(JSON.stringify({ u: p.userId, w: p.workspaceId, s: p.scheme, k: p.apiKeyId })).toString(
    "base64url",
  );
}

export function decodePrincipal(value: string | null): Principal | null {
  if (!value) return null;
  try {
    const o = JSON.parse(Buffer.from(value, "base64url").toString("utf8")) as {
      u?: unknown;
      w?: unknown;
      s?: unknown;
      k?: unknown;
    };
    if (typeof o.u !== "string" || typeof o.w !== "string") return null;
    const scheme = o.s === "bearer" || o.s === "session" ? o.s : "api_key";
    return { userId: o.u, workspaceId: o.w, scheme, apiKeyId: typeof o.k === "string" ? o.k : null };
  } catch {
    return null;
  }
}
