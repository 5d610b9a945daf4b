import type { TestContext } from "node:test";
import { startSandboxPlatform, type SandboxPlatform } from "../../sandboxes/support.ts";
import { isRoot, requireCapability } from "../../support/requirements.ts";
import { startUpstreams, useUpstreamsForEgress } from "./upstreams.ts";

/**
 * A sandbox platform in this process whose egress resolves the test names to loopback upstreams
 * only; null where sandboxes cannot run (not root on Linux), said loudly by the capability check.
 */
export async function startEgressSandboxPlatform(t: TestContext): Promise<SandboxPlatform | null> {
  if (!requireCapability(t, process.platform === "linux" && isRoot(), "sandboxes need root on Linux")) return null;
  useUpstreamsForEgress(await startUpstreams(t));
  return startSandboxPlatform(t);
}
