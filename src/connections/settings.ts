import { z } from "zod";

/**
 * Tunables of the connections feature, read once from the environment. They live here rather than
 * in the shared configuration because only this feature uses them; a bad value stops start-up with
 * the variable's name, like the platform's own configuration.
 */
export interface ConnectionSettings {
  /** Public base URL the browser reaches the callback at (defaults to the control plane's URL). */
  publicUrl: string | null;
  /** How long a started connect flow (its `state`) stays valid. */
  stateTtlSeconds: number;
  /** A token this close to its expiry is refreshed before it is handed out. */
  refreshSkewSeconds: number;
  /** Background sweep period; it refreshes tokens that will expire within `sweepWindowSeconds`. */
  sweepIntervalSeconds: number;
  sweepWindowSeconds: number;
  /** How long one process may hold a token's refresh lease before another may take over. */
  refreshLeaseSeconds: number;
  /** Timeout of each HTTP call to a provider. */
  providerTimeoutSeconds: number;
}

const schema = z.object({
  WHARF_PUBLIC_URL: z.string().url().optional(),
  WHARF_OAUTH_STATE_TTL_SECONDS: z.coerce.number().int().min(30).max(3600).default(600),
  WHARF_OAUTH_REFRESH_SKEW_SECONDS: z.coerce.number().int().min(0).max(3600).default(120),
  WHARF_OAUTH_SWEEP_INTERVAL_SECONDS: z.coerce.number().int().min(0).max(86_400).default(60),
  WHARF_OAUTH_SWEEP_WINDOW_SECONDS: z.coerce.number().int().min(0).max(86_400).default(600),
  WHARF_OAUTH_REFRESH_LEASE_SECONDS: z.coerce.number().int().min(2).max(600).default(30),
  WHARF_OAUTH_PROVIDER_TIMEOUT_SECONDS: z.coerce.number().int().min(1).max(120).default(10),
});

export const connectionSettingVariables: ReadonlyArray<[string, string]> = [
  ["WHARF_PUBLIC_URL", "URL browsers reach the control plane at, for OAuth redirect URIs (default: the listening address)"],
  ["WHARF_OAUTH_STATE_TTL_SECONDS", "lifetime of a started connect flow (default 600)"],
  ["WHARF_OAUTH_REFRESH_SKEW_SECONDS", "refresh tokens this close to expiry before handing them out (default 120)"],
  ["WHARF_OAUTH_SWEEP_INTERVAL_SECONDS", "background refresh sweep period, 0 disables it (default 60)"],
  ["WHARF_OAUTH_SWEEP_WINDOW_SECONDS", "the sweep refreshes tokens expiring within this window (default 600)"],
  ["WHARF_OAUTH_REFRESH_LEASE_SECONDS", "longest a process holds a token's refresh lease (default 30)"],
  ["WHARF_OAUTH_PROVIDER_TIMEOUT_SECONDS", "timeout of each call to a provider (default 10)"],
];

export function loadConnectionSettings(env: NodeJS.ProcessEnv = process.env): ConnectionSettings {
  const parsed = schema.safeParse(Object.fromEntries(Object.entries(env).filter(([k, v]) => k in schema.shape && v !== "")));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new Error(`invalid configuration:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  return {
    publicUrl: e.WHARF_PUBLIC_URL ? e.WHARF_PUBLIC_URL.replace(/\/+$/, "") : null,
    stateTtlSeconds: e.WHARF_OAUTH_STATE_TTL_SECONDS,
    refreshSkewSeconds: e.WHARF_OAUTH_REFRESH_SKEW_SECONDS,
    sweepIntervalSeconds: e.WHARF_OAUTH_SWEEP_INTERVAL_SECONDS,
    sweepWindowSeconds: e.WHARF_OAUTH_SWEEP_WINDOW_SECONDS,
    refreshLeaseSeconds: e.WHARF_OAUTH_REFRESH_LEASE_SECONDS,
    providerTimeoutSeconds: e.WHARF_OAUTH_PROVIDER_TIMEOUT_SECONDS,
  };
}
