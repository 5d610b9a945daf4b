import type { TestContext } from "node:test";
import { createConnectionsFeature } from "../../../src/connections/feature.ts";
import type { ConnectionSettings } from "../../../src/connections/settings.ts";
import { identityFeature } from "../../../src/identity/routes.ts";
import { secretsFeature } from "../../../src/secrets/routes.ts";
import type { Dialect } from "../../../src/store/database.ts";
import { startTestPlatform, type TestPlatform } from "../../support/platform.ts";

/**
 * A whole platform with only the features this area needs (identity, secrets, connections), on a
 * random port and a fresh store; test-sized timings, no background sweep unless asked.
 */
export async function startConnectionsPlatform(
  t: TestContext,
  dialect: Dialect,
  settings: Partial<ConnectionSettings> = {},
): Promise<TestPlatform | null> {
  const features = [
    identityFeature,
    secretsFeature,
    createConnectionsFeature({
      sweepIntervalSeconds: 0,
      refreshLeaseSeconds: 5,
      providerTimeoutSeconds: 2,
      ...settings,
    }),
  ];
  return startTestPlatform(t, { dialect, features });
}

export async function json<T = any>(res: Response | Promise<Response>): Promise<T> {
  const r = await res;
  const text = await r.text();
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new Error(`not JSON (${r.status}): ${text.slice(0, 300)}`);
  }
}
