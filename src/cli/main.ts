import { Command, CommanderError } from "commander";
import { ConfigError, SettingsError } from "../config/errors.ts";
import { CliError } from "./errors.ts";

type Register = (program: Command) => void;

/**
 * Each command's module is imported only when that command runs: `wharf up` pulls in the whole
 * platform (LangGraph, the proxy, …), which would otherwise cost every small command seconds of
 * start-up. Help and unknown commands load them all.
 */
const commands: Record<string, () => Promise<Register>> = {
  up: async () => (await import("./up.ts")).registerUp,
  keys: async () => (await import("./keys.ts")).registerKeys,
  secrets: async () => (await import("./secrets.ts")).registerSecrets,
  auth: async () => (await import("./auth.ts")).registerAuth,
  sandbox: async () => (await import("./sandbox.ts")).registerSandbox,
  dev: async () => (await import("./dev.ts")).registerDev,
  "agent-server": async () => (await import("./agent-server.ts")).registerAgentServer,
  deploy: async () => (await import("./deploy.ts")).registerDeploy,
  deployments: async () => (await import("./deployments.ts")).registerDeployments,
};

export async function buildProgram(argv: string[] = process.argv): Promise<Command> {
  const program = new Command("wharf")
    .description("Wharf: run AI agents, their sandboxes and their credentials on your own machine")
    .version("0.1.0")
    .showHelpAfterError();
  const wanted = argv[2];
  const names = wanted && Object.hasOwn(commands, wanted) ? [wanted] : Object.keys(commands);
  for (const name of names) (await commands[name]())(program);
  return program;
}

export async function main(argv: string[]): Promise<void> {
  const program = await buildProgram(argv);
  program.exitOverride();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) process.exit(err.exitCode);
    if (err instanceof CliError) {
      console.error(`wharf: ${err.message}`);
      process.exit(1);
    }
    if (err instanceof SettingsError || err instanceof ConfigError) {
      console.error(`wharf: ${err.message}`);
      process.exit(2);
    }
    throw err;
  }
}
