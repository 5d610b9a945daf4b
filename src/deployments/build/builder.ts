import fs from "node:fs";
import { installDependencies } from "./dependencies.ts";
import { checkPythonGraphs, installPythonEnvironment, projectNeedsPython } from "./python-deps.ts";
import type { DeploymentsLayout } from "../layout.ts";
import { readProjectConfig, type ProjectConfig } from "./project-config.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import { fetchSource, type SourcePolicy, type SourceSpec } from "./sources.ts";
import { TSX_LOADER } from "../runtime/agent-process.ts";
import { LOAD_CHECK_CHILD } from "../../agent-server/index.ts";

export { TSX_LOADER };

export class BuildError extends Error {}

/**
 * Runs one build step (install, build command, load check) confined as the deployment: `writable`
 * says whether the build folder may change; returns its stdout when `capture`.
 */
export type BuildStep = (step: {
  what: string;
  argv: string[];
  cwd: string;
  env: Record<string, string>;
  writable: boolean;
  capture?: boolean;
  /** Python steps: PyPI (and `hosts`: the project's own indexes and git hosts) is implied in the egress, and this host folder is shown as the workspace's Python environments. */
  python?: { envs: string; writable: boolean; hosts?: string[] };
}) => Promise<string>;

export interface BuildInput {
  revisionId: string;
  source: SourceSpec;
  langgraphConfigPath: string;
  installCommand: string | null;
  buildCommand: string | null;
  /** The deployment's secrets: graphs may read them while being imported. */
  env: Record<string, string>;
}

export interface BuildOutput {
  artifactDir: string;
  projectDir: string;
  configFile: string;
  graphs: string[];
  hasCustomAuth: boolean;
  commitSha: string | null;
}

/**
 * Build = fetch the source, install its dependencies (shared cache), run the optional build
 * command, then import every graph in a child process. Everything goes to the revision's build log.
 */
export async function buildRevision(
  input: BuildInput,
  ctx: {
    layout: DeploymentsLayout;
    log: RevisionLog;
    signal: AbortSignal;
    home: string;
    sources: SourcePolicy;
    workspaceId: string;
    step: BuildStep;
    afterFetch: (artifactDir: string) => void;
  },
): Promise<BuildOutput> {
  const { layout, log, signal } = ctx;
  const artifactDir = layout.buildDir(input.revisionId);
  const started = performance.now();
  const { commitSha } = await fetchSource(input.source, artifactDir, ctx);
  signal.throwIfAborted();
  // From here on the build belongs to the deployment: its own steps write it as its own uid.
  ctx.afterFetch(artifactDir);
  let config;
  try {
    config = readProjectConfig(artifactDir, input.langgraphConfigPath);
  } catch (err) {
    throw new BuildError((err as Error).message, { cause: err });
  }
  log.line(
    `graphs in ${input.langgraphConfigPath}: ${config.graphIds.join(", ")}${config.hasCustomAuth ? " (custom auth)" : ""}`,
  );
  const childEnv: Record<string, string> = { ...input.env, NODE_ENV: "production" };
  await installDependencies(config.dir, {
    layout,
    workspaceId: ctx.workspaceId,
    installCommand: input.installCommand,
    log,
    step: ctx.step,
    env: childEnv,
  });
  if (input.buildCommand) {
    log.line(`running build command: ${input.buildCommand}`);
    await ctx.step({
      what: "build command",
      argv: ["/bin/sh", "-c", input.buildCommand],
      cwd: config.dir,
      env: childEnv,
      writable: true,
    });
  }
  const python = projectNeedsPython(config.file);
  if (python)
    await installPythonEnvironment(config, {
      layout,
      workspaceId: ctx.workspaceId,
      revisionId: input.revisionId,
      log,
      step: ctx.step,
      env: childEnv,
    });
  await checkGraphsLoad(config, python, ctx, childEnv);
  log.line(`build finished in ${Math.round(performance.now() - started)} ms`);
  return {
    artifactDir,
    projectDir: config.dir,
    configFile: config.file,
    graphs: config.graphIds,
    hasCustomAuth: config.hasCustomAuth,
    commitSha,
  };
}

/** Imports every graph (and the auth module) in a child process; a BuildError names those that fail. */
async function checkGraphsLoad(
  config: ProjectConfig,
  python: boolean,
  ctx: { layout: DeploymentsLayout; log: RevisionLog; workspaceId: string; step: BuildStep },
  childEnv: Record<string, string>,
): Promise<void> {
  const { layout, log } = ctx;
  log.line("loading graphs");
  const out = await ctx.step({
    what: "loading the graphs",
    argv: [process.execPath, "--import", TSX_LOADER, LOAD_CHECK_CHILD, config.file],
    cwd: config.dir,
    env: childEnv,
    writable: false,
    capture: true,
  });
  const last = out.trim().split("\n").pop() ?? "";
  let result: {
    graphs: Array<{ id: string; ok: boolean; error?: string }>;
    auth: { ok: boolean; error?: string } | null;
  };
  try {
    result = JSON.parse(last);
  } catch (err) {
    throw new BuildError(`loading the graphs printed no result: ${last.slice(0, 500)}`, { cause: err });
  }
  if (python)
    result.graphs.push(
      ...(await checkPythonGraphs(config, {
        layout,
        workspaceId: ctx.workspaceId,
        log,
        step: ctx.step,
        env: childEnv,
      })),
    );
  const failed = result.graphs.filter((g) => !g.ok);
  for (const g of failed)
    for (const l of (g.error ?? "").split("\n").slice(0, 15)) log.line(`graph ${g.id}: ${l}`, "error");
  if (result.auth && !result.auth.ok) log.line(`auth: ${result.auth.error}`, "error");
  if (failed.length)
    throw new BuildError(`graph${failed.length > 1 ? "s" : ""} ${failed.map((g) => g.id).join(", ")} failed to load`);
  if (result.auth && !result.auth.ok) throw new BuildError(`the auth module failed to load: ${result.auth.error}`);
}

/** Whether an earlier build can be deployed again (rollbacks reuse it without rebuilding). */
export function buildStillThere(projectDir: string | null): boolean {
  return !!projectDir && fs.existsSync(projectDir);
}
