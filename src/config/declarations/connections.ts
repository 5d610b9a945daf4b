import { decl, int } from "./declare.ts";

/** The settings of connections (OAuth flows and tokens). */
export const CONNECTION_SETTINGS = {
  WHARF_OAUTH_STATE_TTL_SECONDS: decl({
    part: "connections",
    type: "seconds",
    default: "600",
    description: "lifetime of a started connect flow",
    schema: int(30, 3600),
  }),
  WHARF_OAUTH_REFRESH_SKEW_SECONDS: decl({
    part: "connections",
    type: "seconds",
    default: "120",
    description: "tokens this close to expiry are refreshed before they are handed out",
    schema: int(0, 3600),
  }),
  WHARF_OAUTH_SWEEP_INTERVAL_SECONDS: decl({
    part: "connections",
    type: "seconds",
    default: "60",
    description: "period of the background refresh sweep (0 disables it)",
    schema: int(0, 86_400),
  }),
  WHARF_OAUTH_SWEEP_WINDOW_SECONDS: decl({
    part: "connections",
    type: "seconds",
    default: "600",
    description: "the sweep refreshes tokens expiring within this window",
    schema: int(0, 86_400),
  }),
  WHARF_OAUTH_REFRESH_LEASE_SECONDS: decl({
    part: "connections",
    type: "seconds",
    default: "30",
    description: "longest one process holds a token's refresh lease",
    schema: int(2, 600),
  }),
  WHARF_OAUTH_PROVIDER_TIMEOUT_SECONDS: decl({
    part: "connections",
    type: "seconds",
    default: "10",
    description: "timeout of each call to an OAuth provider",
    schema: int(1, 120),
  }),
} as const;
