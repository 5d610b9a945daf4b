import path from "node:path";
import { z } from "zod";

/** Platform configuration, read once from the environment at start and validated. */
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
}

const envSchema = z.object({
  WHARF_HOST: z.string().min(1).default("127.0.0.1"),
  WHARF_PORT: z.coerce.number().int().min(0).max(65535).default(8123),
  WHARF_HOME: z.string().min(1).default(".wharf"),
  DATABASE_URL: z
    .string()
    .refine((v) => /^postgres(ql)?:\/\//.test(v) || v.startsWith("sqlite:"), {
      message: "must start with postgres://, postgresql:// or sqlite:",
    })
    .optional(),
  WHARF_MASTER_KEY: z.string().min(1).optional(),
  WHARF_LOG_LEVEL: z.enum(["trace", "debug", "info", "warn", "error", "fatal", "silent"]).default("info"),
  WHARF_BODY_LIMIT_BYTES: z.coerce.number().int().min(1024).default(10 * 1024 * 1024),
  WHARF_UPLOAD_LIMIT_BYTES: z.coerce.number().int().min(1024).default(1024 * 1024 * 1024),
  WHARF_BEARER_TTL_SECONDS: z.coerce.number().int().min(60).max(30 * 24 * 3600).default(3600),
});

export class ConfigError extends Error {}

/** Reads the configuration; throws ConfigError naming every bad variable. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): WharfConfig {
  const parsed = envSchema.safeParse(Object.fromEntries(Object.entries(env).filter(([, v]) => v !== "")));
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join(".")}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n${lines.join("\n")}`);
  }
  const e = parsed.data;
  return {
    host: e.WHARF_HOST,
    port: e.WHARF_PORT,
    home: path.resolve(e.WHARF_HOME),
    databaseUrl: e.DATABASE_URL ?? null,
    masterKey: e.WHARF_MASTER_KEY ?? null,
    logLevel: e.WHARF_LOG_LEVEL,
    bodyLimitBytes: e.WHARF_BODY_LIMIT_BYTES,
    uploadLimitBytes: e.WHARF_UPLOAD_LIMIT_BYTES,
    bearerTtlSeconds: e.WHARF_BEARER_TTL_SECONDS,
  };
}

/** The environment variables an operator can set, for the README and `wharf up --help`. */
export const configVariables: ReadonlyArray<[name: string, meaning: string]> = [
  ["WHARF_HOST", "address the control plane listens on (default 127.0.0.1)"],
  ["WHARF_PORT", "port of the control plane (default 8123)"],
  ["WHARF_HOME", "state folder: SQLite file, master key, bootstrap key (default ./.wharf)"],
  ["DATABASE_URL", "postgres://… to use PostgreSQL instead of the embedded SQLite file"],
  ["WHARF_MASTER_KEY", "base64 32-byte key(s), comma-separated, first one active; default: generated into $WHARF_HOME/master.key"],
  ["WHARF_LOG_LEVEL", "trace|debug|info|warn|error|fatal|silent (default info)"],
  ["WHARF_BODY_LIMIT_BYTES", "largest accepted JSON request body (default 10 MiB)"],
  ["WHARF_UPLOAD_LIMIT_BYTES", "largest deployment source tarball upload, streamed to disk (default 1 GiB); sandbox file uploads are bounded by the sandbox's fs_capacity_bytes"],
  ["WHARF_BEARER_TTL_SECONDS", "lifetime of issued bearer tokens (default 3600)"],
];
