import type { z } from "zod";
import { SettingsError } from "./errors.ts";
import type { SettingDeclaration } from "./declarations/declare.ts";
import { PLATFORM_SETTINGS } from "./declarations/platform.ts";
import { CONNECTION_SETTINGS } from "./declarations/connections.ts";
import { EGRESS_SETTINGS } from "./declarations/egress.ts";
import { SANDBOX_SETTINGS } from "./declarations/sandboxes.ts";
import { DEPLOYMENT_SETTINGS } from "./declarations/deployments.ts";
import { AGENT_SERVER_SETTINGS } from "./declarations/agent-server.ts";

export type { SettingDeclaration, SettingPart } from "./declarations/declare.ts";

/**
 * Every setting Wharf reads, declared once, by area in `declarations/`: its variable, type, default,
 * meaning and the part that uses it. `loadSettings` validates them all at start (a bad value stops
 * start-up naming the variable); `wharf up --help` and the README's configuration table are
 * generated from this list in this order (`test/config/settings.test.ts` checks they agree). To add
 * a setting, add one entry to its area's file and run
 * `node bin/run-ts.js scripts/settings-table.ts --write` to refresh the README.
 */
export const SETTINGS = {
  ...PLATFORM_SETTINGS,
  ...CONNECTION_SETTINGS,
  ...EGRESS_SETTINGS,
  ...SANDBOX_SETTINGS,
  ...DEPLOYMENT_SETTINGS,
  ...AGENT_SERVER_SETTINGS,
} as const;

export type SettingName = keyof typeof SETTINGS;
export type Settings = { [K in SettingName]: z.output<(typeof SETTINGS)[K]["schema"]> };

export { SettingsError };

/** Parses every declared setting from `env`; throws naming every bad variable at once. */
export function loadSettings(env: Record<string, string | undefined>): Settings {
  const out: Record<string, unknown> = {};
  const problems: string[] = [];
  for (const [name, d] of Object.entries(SETTINGS) as Array<[SettingName, SettingDeclaration]>) {
    const raw = env[name] === "" || env[name] === undefined ? d.default : env[name];
    const parsed = d.schema.safeParse(raw);
    if (parsed.success) out[name] = parsed.data;
    else problems.push(`  ${name}: ${parsed.error.issues.map((i) => i.message).join("; ")}`);
  }
  if (problems.length) throw new SettingsError(`invalid configuration:\n${problems.join("\n")}`);
  return out as Settings;
}

/**
 * One declared setting, for code that runs outside a platform (the CLI, graph code calling
 * `getAccessToken`): the same parsing and default as at start, and the same error naming it.
 */
export function readSetting<K extends SettingName>(
  name: K,
  env: Record<string, string | undefined> = process.env,
): Settings[K] {
  const d: SettingDeclaration = SETTINGS[name];
  const raw = env[name] === "" || env[name] === undefined ? d.default : env[name];
  const parsed = d.schema.safeParse(raw);
  if (!parsed.success)
    throw new SettingsError(`invalid configuration: ${name}: ${parsed.error.issues.map((i) => i.message).join("; ")}`);
  return parsed.data as Settings[K];
}
