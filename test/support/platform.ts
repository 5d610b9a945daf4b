import os from "node:os";
import path from "node:path";
import { Writable } from "node:stream";
import { fileURLToPath } from "node:url";
import type { TestContext } from "node:test";
import { loadConfig, SETTINGS, type WharfConfig } from "../../src/config/index.ts";
import { createLogger } from "../../src/log/logger.ts";
import type { Feature } from "../../src/platform/context.ts";
import { startPlatform, type RunningPlatform } from "../../src/platform/start-platform.ts";
import type { Dialect } from "../../src/store/database.ts";
import { storageSettings } from "./dialects.ts";

export interface TestPlatform extends RunningPlatform {
  apiKey: string;
  /** Everything the platform logged, as JSON lines (for leak checks). */
  logs(): string;
  /** fetch against the platform with the bootstrap key unless headers say otherwise. */
  api(path: string, init?: RequestInit & { json?: unknown }): Promise<Response>;
  home: string;
  databaseUrl: string | null;
  pgSchema?: string;
}

const OWN = new Set([
  "WHARF_HOME",
  "WHARF_PORT",
  "WHARF_HOST",
  "DATABASE_URL",
  "WHARF_MASTER_KEY",
  "WHARF_PUBLIC_URL",
  "WHARF_URL",
  "WHARF_API_KEY",
  "WHARF_TENANT_ID",
]);
const CHECKOUT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
/** Folders tests build deployments from with `local_path`: their temporary copies, fixtures and the examples. */
export const TEST_LOCAL_ROOTS = [os.tmpdir(), path.join(CHECKOUT, "test"), path.join(CHECKOUT, "examples")].join(",");

const inheritedSettings = () =>
  Object.fromEntries(Object.entries(process.env).filter(([k]) => k in SETTINGS && !OWN.has(k)));

/**
 * Starts a whole platform on a random port with a fresh store of the given dialect; stops it and
 * drops its storage when the test ends. Returns null when the dialect is unavailable (non-strict).
 */
export async function startTestPlatform(
  t: TestContext,
  options: { dialect?: Dialect; env?: Record<string, string>; features?: Feature[]; logLevel?: string } = {},
): Promise<TestPlatform | null> {
  const s = await storageSettings(t, options.dialect ?? "sqlite");
  if (!s) return null;
  const config: WharfConfig = {
    // Settings a test put in process.env (as an operator would for `wharf up`), except where this
    // platform's storage, port and keys come from; no example deployment and an ephemeral
    // in-process agent-server port unless the test asks.
    ...loadConfig({
      ...inheritedSettings(),
      WHARF_HOME: s.home,
      WHARF_PORT: "0",
      WHARF_EXAMPLE_PROJECT: "off",
      WHARF_AGENT_PORT: "0",
      WHARF_DEPLOY_LOCAL_ROOTS: TEST_LOCAL_ROOTS,
      ...(s.databaseUrl ? { DATABASE_URL: s.databaseUrl } : {}),
      ...options.env,
    }),
  };
  let captured = "";
  const destination = new Writable({
    write(chunk, _enc, cb) {
      captured += chunk.toString();
      cb();
    },
  });
  const log = createLogger({ level: options.logLevel ?? "debug", destination });
  const platform = await startPlatform(config, { log, pgSchema: s.pgSchema, features: options.features });
  const apiKey = platform.bootstrap.apiKey!;
  t.after(async () => {
    await platform.stop();
    await s.dropSchema();
  });
  return {
    ...platform,
    apiKey,
    home: s.home,
    databaseUrl: s.databaseUrl,
    pgSchema: s.pgSchema,
    logs: () => captured,
    api: (path, init = {}) => {
      const headers = new Headers(init.headers);
      if (!headers.has("x-api-key") && !headers.has("authorization")) headers.set("x-api-key", apiKey);
      let body = init.body;
      if (init.json !== undefined) {
        body = JSON.stringify(init.json);
        headers.set("content-type", "application/json");
      }
      return fetch(platform.url + path, { ...init, headers, body });
    },
  };
}
