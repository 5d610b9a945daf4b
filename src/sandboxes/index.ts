// The sandboxes feature's public surface: the platform mounts it through this file only.
export { createSandboxesFeature } from "./feature.ts";
export type { SandboxManager } from "./lifecycle/manager.ts";
