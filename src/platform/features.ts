import { createConsoleFeature } from "../console/index.ts";
import { createConnectionsFeature } from "../connections/feature.ts";
import { createDeploymentsFeature } from "../deployments/index.ts";
import { createEgressFeature } from "../egress/index.ts";
import { identityFeature } from "../identity/routes.ts";
import { createMetricsFeature } from "../metrics/index.ts";
import { createSandboxesFeature } from "../sandboxes/index.ts";
import { secretsFeature } from "../secrets/routes.ts";
import type { Feature } from "./context.ts";

/** Every part of the platform, in mount order. Each feature adds one line here. */
export function allFeatures(): Feature[] {
  return [
    identityFeature,
    secretsFeature,
    createConnectionsFeature(),
    createEgressFeature(),
    createSandboxesFeature(),
    createDeploymentsFeature(),
    createConsoleFeature(),
    createMetricsFeature(),
  ];
}
