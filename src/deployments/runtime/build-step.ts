import path from "node:path";
import type { Database } from "../../store/schema.ts";
import type { BuildStep } from "../build/builder.ts";
import { buildLimits, buildPlan, limitsFor } from "../confinement/confinement.ts";
import { ownFolder, type Launched } from "../../confinement/index.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import { CommandFailed } from "../build/run-command.ts";
import { buildRegistryPlan, type BuildRegistryPlan } from "../build/registry-hosts.ts";
import type { HostRegistries } from "../build/host-registries.ts";
import { readProjectFile } from "../build/project-file.ts";
import { buildEgressId } from "../confinement/egress-plan.ts";
import type { ProcessEgress } from "./revision-egress.ts";
import { BuildRefusals } from "./egress-refusals.ts";
import { hostVariable } from "../../config/index.ts";
import type { DeploymentIdentity } from "./deployment-identity.ts";
import { pythonEnvBinds, resourceSpecOf, unplacedNote } from "./launch-support.ts";
import { inside, type RuntimeDeps } from "./runtime-deps.ts";

type Deployment = Database["deployments"];

/** The build a step belongs to. */
export interface BuildJob {
  deployment: Deployment;
  revisionId: string;
  ident: DeploymentIdentity;
  log: RevisionLog;
  signal: AbortSignal;
}

/**
 * Runs one build step confined as the deployment, its output going to the build log. The step
 * reaches out only through the egress proxy, under the deployment's `proxy_config` with its
 * package registries allowed.
 */
export async function runBuildStep(
  rt: RuntimeDeps,
  hostRegistries: () => Promise<HostRegistries>,
  job: BuildJob,
  step: Parameters<BuildStep>[0],
): Promise<string> {
  const { deployment, revisionId, ident, log, signal } = job;
  const limits = buildLimits(limitsFor(resourceSpecOf(deployment)));
  const npmCache = rt.layout.npmCacheFor(deployment.id);
  signal.throwIfAborted();
  ownFolder(npmCache, ident.uid, rt.isolated);
  const artifactDir = rt.layout.buildDir(revisionId);
  // The project's own file, read on the host: never followed, never blocking, capped.
  const npmrc = readProjectFile(artifactDir, path.relative(artifactDir, path.join(step.cwd, ".npmrc")));
  const plan = buildRegistryPlan({
    npmrc,
    env: step.env,
    host: await hostRegistries(),
    python: !!step.python,
    allowInternal: rt.ctx.config.settings.WHARF_BUILD_REGISTRIES_INTERNAL,
  });
  // The project's own indexes, git hosts and uv.lock sources (Python), beside the registries.
  const registries = step.python?.hosts?.length ? [...new Set([...plan.allow, ...step.python.hosts])] : plan.allow;
  if (step.python?.writable) ownFolder(step.python.envs, ident.uid, rt.isolated);
  const egress = rt.isolated
    ? await rt.egress.open({
        id: buildEgressId(revisionId),
        deploymentId: deployment.id,
        workspaceId: deployment.workspace_id,
        registries: { allow: registries, trust: { internalHosts: plan.internal, upstreamCaFiles: plan.caFiles } },
        onUnplaced: unplacedNote(log),
      })
    : null;
  const env: Record<string, string> = {
    PATH: "/usr/bin:/bin",
    HOME: rt.isolated ? "/tmp" : npmCache,
    LANG: hostVariable("LANG") ?? "C.UTF-8",
    npm_config_cache: rt.isolated ? "/npm-cache" : npmCache,
    ...plan.env,
    ...step.env,
    ...egress?.env,
  };
  let launched: Launched;
  try {
    const plan = buildPlan({
      layout: rt.layout,
      workspaceId: deployment.workspace_id,
      artifactDir,
      projectDir: step.cwd,
      npmCache,
      writable: step.writable,
    });
    launched = await rt.launcher.launch({
      id: buildEgressId(revisionId),
      uid: ident.uid,
      limits,
      plan: {
        ...plan,
        binds: [
          ...plan.binds,
          ...pythonEnvBinds(rt.layout, deployment.workspace_id, step.python),
          ...(egress?.binds ?? []),
        ],
      },
      argv: step.argv.map((a) => inside(rt, a)),
      env,
      cwd: inside(rt, step.cwd),
      capture: egress?.capture ?? null,
      onNetwork: egress ? (pid, captured) => egress.attach(pid, captured) : undefined,
    });
  } catch (err) {
    await egress?.close();
    throw err;
  }
  return awaitBuildStep(launched, step, revisionId, log, signal, egress, plan.hostEntries);
}

/** Waits for a launched build step (killed on interrupt); its captured output, or CommandFailed. */
async function awaitBuildStep(
  launched: Launched,
  step: Parameters<BuildStep>[0],
  revisionId: string,
  log: RevisionLog,
  signal: AbortSignal,
  egress: ProcessEgress | null,
  hostRegistries: BuildRegistryPlan["hostEntries"],
): Promise<string> {
  let captured = "";
  launched.stdout.on("data", step.capture ? (d: Buffer) => (captured += d.toString()) : log.lineSink("info"));
  launched.stderr.on("data", log.lineSink("info"));
  const kill = () => void launched.stop(0);
  // An interrupt that arrived while the confinement was starting has already fired its event.
  if (signal.aborted) kill();
  else signal.addEventListener("abort", kill, { once: true });
  const refusals = egress ? new BuildRefusals(buildEgressId(revisionId), log, kill, { hostRegistries }) : null;
  try {
    const code = await launched.exited;
    await launched.stop(0);
    signal.throwIfAborted();
    if (code !== 0)
      throw new CommandFailed(refusals?.failure(step.what) ?? `${step.what} failed (exit ${code ?? "signal"})`);
    return captured;
  } finally {
    refusals?.close();
    signal.removeEventListener("abort", kill);
    await egress?.close();
  }
}
