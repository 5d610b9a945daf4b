import type { CanonicalHost } from "../policy/canonical-host.ts";
import type { InjectedHeader, SandboxPolicy } from "../policy/policy.ts";

/** The headers to inject for this request (first matching header rule), or an unavailable credential. */
export function credentialsFor(
  policy: SandboxPolicy,
  host: CanonicalHost,
  path: string,
): { rule: string; headers: InjectedHeader[] | null; error: string | null } | null {
  if (policy.isNoProxy(host)) return null;
  const rule = policy.headerRuleFor(host, path);
  if (!rule) return null;
  if (!rule.headers) return { rule: rule.name, headers: null, error: rule.problem ?? "unresolved" };
  return { rule: rule.name, headers: rule.headers, error: null };
}
