import type { Settings } from "../config/index.ts";

/** Tunables of the connections feature, from the platform's validated settings. */
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

/** The connections part of the platform's settings (declared in src/config/settings.ts). */
export function loadConnectionSettings(s: Settings): ConnectionSettings {
  return {
    publicUrl: s.WHARF_PUBLIC_URL ?? null,
    stateTtlSeconds: s.WHARF_OAUTH_STATE_TTL_SECONDS,
    refreshSkewSeconds: s.WHARF_OAUTH_REFRESH_SKEW_SECONDS,
    sweepIntervalSeconds: s.WHARF_OAUTH_SWEEP_INTERVAL_SECONDS,
    sweepWindowSeconds: s.WHARF_OAUTH_SWEEP_WINDOW_SECONDS,
    refreshLeaseSeconds: s.WHARF_OAUTH_REFRESH_LEASE_SECONDS,
    providerTimeoutSeconds: s.WHARF_OAUTH_PROVIDER_TIMEOUT_SECONDS,
  };
}
