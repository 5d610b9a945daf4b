import type { Database } from "../../store/schema.ts";
import { insidePath, type Bind, type MountPlan } from "../confinement/confinement.ts";
import type { DeploymentsLayout } from "../layout.ts";
import type { RevisionLog } from "../store/revision-logs.ts";

type Deployment = Database["deployments"];

export function withExtraBinds(plan: MountPlan, extra: Bind[], egress: Bind[] = []): MountPlan {
  return { ...plan, binds: [...plan.binds, ...extra, ...egress] };
}

/**
 * The workspace's Python environments (or a build's staging folder for them) shown at the inside
 * path of `deps/<workspace>/python`, so a venv made there works where the agent server uses it.
 */
export function pythonEnvBinds(
  layout: DeploymentsLayout,
  workspaceId: string,
  python: { envs: string; writable: boolean } | undefined,
): Bind[] {
  if (!python) return [];
  return [
    {
      src: python.envs,
      dest: insidePath(layout, layout.pythonEnvsFor(workspaceId)),
      rw: python.writable,
      beneath: layout.deps,
    },
  ];
}

/** Egress files that cannot appear in the confinement (a new file under read-only `/etc`), told in the log. */
export const unplacedNote = (log: RevisionLog) => (paths: string[]) =>
  log.line(
    `egress: ${paths.join(", ")} cannot be shown in the confinement (no such folder in its read-only tree)`,
    "warning",
  );

export function resourceSpecOf(deployment: Deployment): Record<string, unknown> | null {
  try {
    return (
      ((JSON.parse(deployment.source_config) as { resource_spec?: Record<string, unknown> | null }).resource_spec ??
        null) ||
      null
    );
  } catch {
    return null;
  }
}
