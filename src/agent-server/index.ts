// The agent server's public surface: everything outside src/agent-server imports from here.
export { createAgentServerApp, startAgentServer, defaultServerId } from "./server.ts";
export type { AgentServer, AgentServerOptions, RunningAgentServer, StandaloneOptions } from "./server.ts";
export { createAgentServerFeature, EXAMPLE_PROJECT } from "./feature.ts";
export { loadProject, applyProjectEnv, graphRuntime, ProjectError } from "./project/project.ts";
export type { AgentProject } from "./project/project.ts";
export { systemAssistantId } from "./storage/assistants.ts";
export { claimDueCrons } from "./crons/crons.ts";
export { onRunEnded, type RunEnded } from "./runs/run-events.ts";
export { registerSdkLogger } from "./project/sdk-logger.ts";
export {
  createPythonEnv,
  ensurePythonEnv,
  gitDependencyUrl,
  pipConfigIndexes,
  pipConfigUrls,
  PythonEnvError,
  pythonEnvKey,
  startPythonRuntime,
  uvLockUrls,
} from "./python/index.ts";
export { attachProtocolUpgrades } from "./protocol/index.ts";
export { LOAD_CHECK_CHILD, PYTHON_ENV_CHILD } from "./build-checks/index.ts";
