import pino, { type Logger } from "pino";

export type { Logger };

/**
 * Paths the logger itself censors, so that no call site has to remember: credentials in request
 * headers and any field whose name says it carries a secret.
 */
export const redactedPaths = [
  "req.headers.authorization",
  'req.headers["x-api-key"]',
  'req.headers["proxy-authorization"]',
  "req.headers.cookie",
  "*.authorization",
  "*.password",
  "*.secret",
  "*.client_secret",
  "*.value",
  "*.token",
  "*.access_token",
  "*.refresh_token",
  "*.api_key",
  "*.key_material",
  "value",
  "token",
  "secret",
];

export interface LoggerOptions {
  level?: string;
  /** Where JSON lines go; defaults to stdout. Tests pass a stream to grep what was logged. */
  destination?: pino.DestinationStream;
  pretty?: boolean;
}

export function createLogger(options: LoggerOptions = {}): Logger {
  const base: pino.LoggerOptions = {
    level: options.level ?? "info",
    redact: { paths: redactedPaths, censor: "[redacted]" },
    base: { service: "wharf" },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (options.destination) return pino(base, options.destination);
  const pretty = options.pretty ?? Boolean(process.stdout.isTTY);
  if (pretty) {
    return pino({
      ...base,
      transport: {
        target: "pino-pretty",
        options: { colorize: true, translateTime: "SYS:HH:MM:ss.l", ignore: "pid,hostname,service" },
      },
    });
  }
  return pino(base);
}
