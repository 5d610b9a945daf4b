import { nowIso } from "../../store/database.ts";
import type { Database } from "../../store/schema.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import type { EngineState } from "./engine-state.ts";
import { LiveRevision } from "./live-revision.ts";
import { soleServer, type LocalServer, type OtherRevision } from "./sole-server.ts";

/**
 * Starts an agent server for a built revision (confined); `/ok` is awaited by the caller, which
 * then calls `live.here.up()` (its failure stops the process, which does the same). Waits first
 * for the deployment's other starts in this process (see LocalServers).
 */
export async function startProcess(
  s: EngineState,
  deployment: Database["deployments"],
  revisionId: string,
  project: { artifactDir: string; projectDir: string; configFile: string },
  secrets: Array<{ name: string; value: string }>,
  log: RevisionLog,
  signal?: AbortSignal,
): Promise<LiveRevision> {
  const here = s.servers.begin(deployment.id, revisionId);
  try {
    const waitStarted = performance.now();
    const theirTurnEnded = await here.turn(signal);
    const waited = Math.round(performance.now() - waitStarted);
    if (!theirTurnEnded)
      log.line(
        `another server of the deployment starting here did not answer GET /ok within ${waited} ms: starting beside it`,
        "warning",
      );
    else if (waited >= 100)
      log.line(`waited ${waited} ms for another server of the deployment starting here to answer GET /ok`);
    // The wait may have ended with the platform's shutdown (the other start was aborted by it).
    if (s.stopped) throw new Error("the platform is shutting down");
    const exclusive = await soleServerOf(s, here);
    const proc = await s.runtime.startServer(deployment, revisionId, project, secrets, log, { exclusive });
    void proc.exited.then(() => here.end());
    log.line(
      `started the agent server (pid ${proc.pid}${s.opts.isolation ? ", confined" : ""}${exclusive ? ", the deployment's only server" : ""}) on ${proc.url}`,
    );
    return new LiveRevision(deployment.id, revisionId, proc, log, here);
  } catch (err) {
    here.end();
    throw err;
  }
}

/** Whether no other revision of the deployment runs, here or in a live platform process (see sole-server.ts). */
async function soleServerOf(s: EngineState, here: LocalServer): Promise<boolean> {
  const rows = await s.db
    .selectFrom("deployment_revisions")
    .select(["id", "owner", "lease_until", "pid", "serving_url"])
    .where("deployment_id", "=", here.deploymentId)
    .where("id", "!=", here.revisionId)
    .where("owner", "is not", null)
    .execute();
  const others: OtherRevision[] = rows.map((r) => ({
    runningHere: false,
    owner: r.owner,
    leaseUntil: r.lease_until,
    hasServer: r.pid !== null || r.serving_url !== null,
  }));
  return soleServer([...others, ...here.others()], s.nodeId, nowIso(), s.owners.gone);
}
