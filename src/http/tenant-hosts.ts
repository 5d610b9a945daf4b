/**
 * Tenant content's own origins. Bytes a workspace controls (a sandbox's service, a file behind a
 * download link, a deployment's routes) are served at `<label>.<WHARF_TENANT_DOMAIN>` on the
 * control plane's port, routed by the Host header on the same listener, so a page there is never
 * the console's origin: it cannot read `/console/api/session`, and the console's host-only session
 * cookie is never sent to it. The path-style routes stay for API clients (SDKs use
 * `/deployments/{id}` as their base URL; Node does not resolve `*.localhost`); what they serve
 * carries `CONSOLE_ORIGIN_CONTENT_HEADERS`.
 */

export type TenantTarget =
  | { kind: "service"; sandboxId: string; port: number }
  | { kind: "download"; sandboxId: string }
  | { kind: "deployment"; deploymentId: string };

const UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}";
const SERVICE_LABEL = new RegExp(`^svc-(\\d{1,5})-(${UUID})$`);
const DOWNLOAD_LABEL = new RegExp(`^dl-(${UUID})$`);
const DEPLOYMENT_LABEL = new RegExp(`^dep-(${UUID})$`);

/**
 * The path-style routes a tenant host's requests are served by (their owners: the sandboxes'
 * service URLs and download links, the deployments' stable URL; a test checks they agree).
 */
export const TENANT_PATHS = {
  service: "/sandboxes/service",
  download: "/sandboxes/download",
  deployment: "/deployments",
} as const;

/**
 * For tenant bytes served on the console's origin: the page gets an opaque origin (no scripts, no
 * same-origin reads, no cookies of the console's) and its type is taken as declared.
 */
export const CONSOLE_ORIGIN_CONTENT_HEADERS: Readonly<Record<string, string>> = {
  "content-security-policy": "sandbox",
  "x-content-type-options": "nosniff",
};

/** Cookies the platform itself sets: tenant responses may never set (or replace) them. */
export const PLATFORM_COOKIES = ["wharf_session", "wharf_sandbox_service"];

export function tenantLabel(t: TenantTarget): string {
  if (t.kind === "service") return `svc-${t.port}-${t.sandboxId}`;
  if (t.kind === "download") return `dl-${t.sandboxId}`;
  return `dep-${t.deploymentId}`;
}

/**
 * What a Host header names: a tenant (`TenantTarget`), `"unknown"` for a name under the tenant
 * domain that is no tenant's, or null for any other host (the console's origin).
 */
export function parseTenantHost(host: string | null | undefined, domain: string): TenantTarget | "unknown" | null {
  if (!host) return null;
  const name = host.toLowerCase().replace(/:\d+$/, "").replace(/\.$/, "");
  if (!name.endsWith(`.${domain}`)) return null;
  const label = name.slice(0, -domain.length - 1);
  let m = SERVICE_LABEL.exec(label);
  if (m && Number(m[1]) >= 1 && Number(m[1]) <= 65535) return { kind: "service", port: Number(m[1]), sandboxId: m[2] };
  if ((m = DOWNLOAD_LABEL.exec(label))) return { kind: "download", sandboxId: m[1] };
  if ((m = DEPLOYMENT_LABEL.exec(label))) return { kind: "deployment", deploymentId: m[1] };
  return "unknown";
}

/** The path-style prefix that serves a tenant host. */
export function tenantPathPrefix(t: TenantTarget): string {
  if (t.kind === "service") return `${TENANT_PATHS.service}/${t.sandboxId}/${t.port}`;
  if (t.kind === "download") return TENANT_PATHS.download;
  return `${TENANT_PATHS.deployment}/${t.deploymentId}`;
}

/** A request URL without a tenant host's name: nothing under the tenant domain reaches platform routes. */
const NO_TENANT = "/__wharf/no-such-tenant";

/**
 * The request target (`/path?query`) the app serves a request with: a tenant host's requests go to
 * its path-style routes (whatever path they name), names under the tenant domain that are no
 * tenant's to a path that answers 404, others unchanged.
 */
export function routedTarget(host: string | null | undefined, target: string, domain: string): string {
  const t = parseTenantHost(host, domain);
  if (t === null) return target;
  if (t === "unknown") return NO_TENANT;
  return tenantPathPrefix(t) + (target.startsWith("/") ? target : `/${target}`);
}

/** The origin of a tenant: the control plane's scheme and port (`base`), the tenant's own host name. */
export function tenantOrigin(t: TenantTarget, domain: string, base: string): string {
  const u = new URL(base);
  return `${u.protocol}//${tenantLabel(t)}.${domain}${u.port ? `:${u.port}` : ""}`;
}

/**
 * Whether the API hands out tenant-host URLs to clients other than browsers: not for `localhost`,
 * which browsers resolve to loopback but Node, curl's older builds and others may not.
 */
export function tenantHostsForApiClients(domain: string): boolean {
  return domain !== "localhost";
}

function cookieName(setCookie: string): string {
  return setCookie
    .slice(0, Math.max(0, setCookie.indexOf("=")))
    .trim()
    .replace(/^__(host|secure)-/i, "");
}

/**
 * The `Set-Cookie` values of a tenant's response that may reach the client: none on the console's
 * origin (a cookie set there is the console's, whatever its path), elsewhere all but the platform's
 * own names.
 */
export function allowedSetCookies(values: readonly string[], onConsoleOrigin: boolean): string[] {
  if (onConsoleOrigin) return [];
  return values.filter((v) => !PLATFORM_COOKIES.includes(cookieName(v).toLowerCase()));
}

/**
 * A Cookie header without the platform's own cookies (the console's session, a service's access
 * token), for requests forwarded to tenant code: null when nothing else is left.
 */
export function withoutPlatformCookies(cookieHeader: string): string | null {
  const rest = cookieHeader
    .split(";")
    .map((p) => p.trim())
    .filter((p) => p && !PLATFORM_COOKIES.includes(cookieName(p).toLowerCase()));
  return rest.length ? rest.join("; ") : null;
}

/** A raw HTTP response head (status line, header lines, blank line) with `allowedSetCookies` applied. */
export function withAllowedSetCookies(head: string, onConsoleOrigin: boolean): string {
  return head
    .split("\r\n")
    .filter((line, i) => {
      const m = i > 0 ? /^set-cookie\s*:\s*(.*)$/i.exec(line) : null;
      return !m || allowedSetCookies([m[1]], onConsoleOrigin).length > 0;
    })
    .join("\r\n");
}
