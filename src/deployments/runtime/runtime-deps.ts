import type { PlatformContext } from "../../platform/context.ts";
import type { Launcher } from "../../confinement/index.ts";
import { insidePath } from "../confinement/confinement.ts";
import type { DeploymentsLayout } from "../layout.ts";
import type { DeploymentEgress } from "./revision-egress.ts";

/** What the runtime's parts (identity, build steps, server start, clean-up) share. */
export interface RuntimeDeps {
  readonly ctx: PlatformContext;
  readonly layout: DeploymentsLayout;
  readonly launcher: Launcher;
  /** Every running process's way out, updated when the deployment's proxy_config changes. */
  readonly egress: DeploymentEgress;
  readonly isolated: boolean;
}

/** A host path as the confined process sees it (unchanged without isolation). */
export function inside(rt: RuntimeDeps, p: string, layout = rt.layout): string {
  return rt.isolated ? insidePath(layout, p) : p;
}
