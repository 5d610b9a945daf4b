import os from "node:os";
import path from "node:path";
import type { TestContext } from "node:test";
import { allFeatures } from "../../src/platform/features.ts";
import { createSandboxesFeature } from "../../src/sandboxes/feature.ts";
import type { SandboxManager } from "../../src/sandboxes/lifecycle/manager.ts";
import type { Dialect } from "../../src/store/database.ts";
import { startTestPlatform, type TestPlatform } from "../support/platform.ts";
import { isRoot, requireCapability } from "../support/requirements.ts";

/** Shared across test runs: the base image is built once per package set (about a second). */
export const BASE_CACHE = path.join(os.tmpdir(), "wharf-test-sandbox-base");

export interface SandboxPlatform extends TestPlatform {
  manager(): SandboxManager;
  /** Creates a sandbox and returns its record (asserting 201). */
  create(body?: Record<string, unknown>): Promise<Record<string, any>>;
  exec(
    sandbox: Record<string, any>,
    command: string,
    extra?: Record<string, unknown>,
  ): Promise<{ status: number; body: any }>;
}

/** A platform whose sandboxes stop with it; null (skipped loudly) without root on Linux. */
export async function startSandboxPlatform(
  t: TestContext,
  opts: { dialect?: Dialect; env?: Record<string, string>; platformEnv?: Record<string, string> } = {},
): Promise<SandboxPlatform | null> {
  if (
    !requireCapability(
      t,
      process.platform === "linux" && isRoot(),
      "sandboxes need root on Linux (namespaces, overlayfs, cgroups)",
    )
  )
    return null;
  const feature = createSandboxesFeature({
    WHARF_SANDBOX_BASE_CACHE: BASE_CACHE,
    WHARF_SANDBOX_TICK_MS: "100",
    ...opts.env,
  });
  const features = allFeatures()
    .filter((f) => f.name !== "sandboxes")
    .concat(feature);
  const p = await startTestPlatform(t, { dialect: opts.dialect, features, logLevel: "info", env: opts.platformEnv });
  if (!p) return null;
  const sp = p as SandboxPlatform;
  sp.manager = () => feature.manager()!;
  sp.create = async (body = {}) => {
    const res = await p.api("/v2/sandboxes/boxes", { method: "POST", json: body });
    const json = await res.json();
    if (res.status !== 201) throw new Error(`create failed: ${res.status} ${JSON.stringify(json)}`);
    return json;
  };
  sp.exec = async (sandbox, command, extra = {}) => {
    const res = await fetch(`${sandbox.dataplane_url}/execute`, {
      method: "POST",
      headers: { "x-api-key": p.apiKey, "content-type": "application/json" },
      body: JSON.stringify({ command, ...extra }),
    });
    return { status: res.status, body: await res.json() };
  };
  return sp;
}
