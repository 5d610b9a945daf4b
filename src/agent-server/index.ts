// The agent server's public surface: everything outside src/agent-server imports from here.
export { createAgentServerApp, startAgentServer, defaultServerId } from "./server.ts";
export type { AgentServer, AgentServerOptions, RunningAgentServer, StandaloneOptions } from "./server.ts";
export { createAgentServerFeature, EXAMPLE_PROJECT } from "./feature.ts";
export { loadProject, applyProjectEnv, graphRuntime, ProjectError } from "./project/project.ts";
export type { AgentProject } from "./project/project.ts";
export { systemAssistantId } from "./storage/assistants.ts";
export { claimDueCrons } from "./crons/crons.ts";
export { registerSdkLogger } from "./project/sdk-logger.ts";
export { ensurePythonEnv, PythonEnvError, pythonEnvKey, startPythonRuntime } from "./python/index.ts";
