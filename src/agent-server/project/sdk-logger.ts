import type { Logger } from "../../log/logger.ts";

/** Where `getLogger()` of `@langchain/langgraph-sdk/logging` looks for the platform's logger. */
const GLOBAL_LOGGER = Symbol.for("langgraph.api.sdk-logger");

/** winston's level names (what the LangGraph server's logger offers) → pino's. */
const LEVELS = {
  error: "error",
  warn: "warn",
  help: "info",
  data: "info",
  info: "info",
  http: "info",
  prompt: "info",
  input: "info",
  verbose: "debug",
  debug: "debug",
  silly: "trace",
} as const;

type LevelName = keyof typeof LEVELS;
export type SdkLogger = Record<LevelName, (message: unknown, ...meta: unknown[]) => SdkLogger>;

/** One winston-style call (`info("text", {extra})`, `info({message, ...})`) as a pino line. */
function write(log: Logger, level: LevelName, message: unknown, meta: unknown[]): void {
  const fields: Record<string, unknown> = {};
  for (const m of meta) if (m && typeof m === "object" && !Array.isArray(m)) Object.assign(fields, m);
  let text: string;
  if (typeof message === "string") text = message;
  else if (message instanceof Error) {
    fields.err = message;
    text = message.message;
  } else if (message && typeof message === "object") {
    const { message: inner, ...rest } = message as Record<string, unknown>;
    Object.assign(fields, rest);
    text = typeof inner === "string" ? inner : JSON.stringify(rest);
  } else text = String(message);
  log[LEVELS[level]](fields, text);
}

/** A logger with the methods graphs call through `getLogger()`, writing to the server's log. */
export function createSdkLogger(log: Logger): SdkLogger {
  const child = log.child({ source: "graph" });
  const out = {} as SdkLogger;
  for (const level of Object.keys(LEVELS) as LevelName[]) {
    out[level] = (message, ...meta) => {
      write(child, level, message, meta);
      return out;
    };
  }
  return out;
}

/**
 * Registers the logger `getLogger()` returns, as the LangGraph server does before it imports graph
 * modules: many projects call `getLogger()` at import time and fail to load without it.
 */
export function registerSdkLogger(log: Logger): void {
  (globalThis as Record<symbol, unknown>)[GLOBAL_LOGGER] = createSdkLogger(log);
}
