import path from "node:path";
import { ConfigError, SettingsError } from "./errors.ts";
import { loadSettings, type Settings } from "./settings.ts";

export { ConfigError };

/**
 * Platform configuration, read once from the environment at start and validated. The common
 * fields are spelled out; `settings` holds every declared setting (src/config/settings.ts), which
 * each part reads through the platform context instead of `process.env`.
 */
export interface WharfConfig {
  host: string;
  port: number;
  home: string;
  databaseUrl: string | null;
  masterKey: string | null;
  logLevel: string;
  bodyLimitBytes: number;
  /** Streamed uploads (deployment tarballs) are not held in memory; this caps their size. */
  uploadLimitBytes: number;
  bearerTtlSeconds: number;
  settings: Settings;
}

/** Reads the configuration; throws ConfigError naming every bad variable. */
export function loadConfig(env: Record<string, string | undefined> = process.env): WharfConfig {
  let s: Settings;
  try {
    s = loadSettings(env);
  } catch (err) {
    if (err instanceof SettingsError) throw new ConfigError(err.message, { cause: err });
    throw err;
  }
  const refusal = replicaRefusal(s.DATABASE_URL, s.REDIS_URL);
  if (refusal) throw new ConfigError(refusal);
  return {
    host: s.WHARF_HOST,
    port: s.WHARF_PORT,
    home: path.resolve(s.WHARF_HOME),
    databaseUrl: s.DATABASE_URL ?? null,
    masterKey: s.WHARF_MASTER_KEY ?? null,
    logLevel: s.WHARF_LOG_LEVEL,
    bodyLimitBytes: s.WHARF_BODY_LIMIT_BYTES,
    uploadLimitBytes: s.WHARF_UPLOAD_LIMIT_BYTES,
    bearerTtlSeconds: s.WHARF_BEARER_TTL_SECONDS,
    settings: s,
  };
}

/**
 * Replicas share their runs through PostgreSQL; Redis only carries their events. Redis beside
 * SQLite would suggest a scale-out that SQLite (one process) cannot give, so it is refused.
 */
export function replicaRefusal(databaseUrl: string | undefined, redisUrl: string | undefined): string | null {
  if (!redisUrl) return null;
  if (databaseUrl && /^postgres(ql)?:\/\//.test(databaseUrl)) return null;
  return "REDIS_URL needs DATABASE_URL to be PostgreSQL (replicas share runs through it); with SQLite Wharf runs as one process without Redis";
}
