/**
 * The deployments area's one public surface: the feature the platform mounts (control-plane
 * routes, signed uploads, each deployment's stable URL) and the example deployment `wharf up`
 * creates. By concern: `api/` (routes, schemas, the stable-URL proxy), `build/` (sources,
 * dependencies, load check), `confinement/` (mount plans, launcher), `rollout/` (the engine,
 * revision states, health), `runtime/` (the revision's agent server, its data-plane gateway),
 * `store/` (tables, logs, sealed secrets).
 */
export { createDeploymentsFeature } from "./feature.ts";
export { ensureExampleDeployment } from "./example-deployment.ts";
export type { DeploymentsOptions } from "./rollout/options.ts";
