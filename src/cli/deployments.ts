import type { Command } from "commander";
import { callApi, CliError, connectionFromEnv, type Connection } from "./api-client.ts";
import { addConnectionOptions, printTable } from "./output.ts";

// Shared by `wharf deploy` and `wharf deployments`: finding deployments and reading revisions.

export interface DeploymentView {
  id: string;
  name: string;
  source: string;
  status: string;
  latest_revision_id: string | null;
  active_revision_id: string | null;
  source_config: { custom_url: string; [k: string]: unknown };
  source_revision_config: Record<string, unknown>;
  secrets: Array<{ name: string; value: null }>;
  created_at: string;
  updated_at: string;
}

export interface RevisionView {
  id: string;
  status: string;
  status_message: string | null;
  created_at: string;
  updated_at: string;
  source_revision_config: Record<string, unknown>;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const TERMINAL = new Set([
  "DEPLOYED",
  "CREATE_FAILED",
  "BUILD_FAILED",
  "DEPLOY_FAILED",
  "SKIPPED",
  "INTERRUPTED",
]);

export async function findByName(conn: Connection, name: string): Promise<DeploymentView | null> {
  const page = await callApi<{ resources: DeploymentView[] }>(
    conn,
    "GET",
    `/v2/deployments?limit=100&name_contains=${encodeURIComponent(name)}`,
  );
  return page.resources.find((d) => d.name === name) ?? null;
}

/** A deployment named by id or by name. */
export async function resolveDeployment(conn: Connection, ref: string): Promise<DeploymentView> {
  if (UUID.test(ref)) return callApi<DeploymentView>(conn, "GET", `/v2/deployments/${ref}`);
  const found = await findByName(conn, ref);
  if (!found) throw new CliError(`no deployment named ${ref}`);
  return found;
}

export async function logLines(
  conn: Connection,
  deploymentId: string,
  revisionId: string,
  kind: "build" | "deploy",
  tail?: number,
): Promise<string[]> {
  const q = tail ? `limit=${tail}&order=desc` : "limit=1000&order=asc";
  const page = await callApi<{ logs: Array<{ timestamp: string; level: string; message: string }> }>(
    conn,
    "GET",
    `/v2/deployments/${deploymentId}/revisions/${revisionId}/${kind}_logs?${q}`,
  );
  const logs = tail ? page.logs.reverse() : page.logs;
  return logs.map(
    (l) => `${l.timestamp.slice(11, 23)} ${l.level === "info" ? "" : l.level.toUpperCase() + " "}${l.message}`,
  );
}

/**
 * Polls a revision until it is terminal, printing each status as it changes with the elapsed time
 * (the progress a CI log shows). Returns the final revision.
 */
export async function waitForRevision(
  conn: Connection,
  deploymentId: string,
  revisionId: string,
  opts: { timeoutMs: number; print: (line: string) => void },
): Promise<RevisionView> {
  const started = Date.now();
  let last = "";
  for (;;) {
    const rev = await callApi<RevisionView>(conn, "GET", `/v2/deployments/${deploymentId}/revisions/${revisionId}`);
    if (rev.status !== last) {
      last = rev.status;
      opts.print(
        `   ${rev.status}${TERMINAL.has(rev.status) ? "" : "..."} (${((Date.now() - started) / 1000).toFixed(1)}s)`,
      );
    }
    if (TERMINAL.has(rev.status)) return rev;
    if (Date.now() - started > opts.timeoutMs)
      throw new CliError(
        `timed out after ${Math.round(opts.timeoutMs / 1000)} s waiting for revision ${revisionId} (still ${rev.status}); it keeps going on the server`,
      );
    await new Promise((r) => setTimeout(r, 500));
  }
}

export function registerDeployments(program: Command): void {
  const cmd = program.command("deployments").description("list, inspect, roll back and remove deployments");
  addListingCommands(cmd);
  addChangeCommands(cmd);
}

/** `deployments ls`, `get`, `logs`. */
function addListingCommands(cmd: Command): void {
  addConnectionOptions(cmd.command("ls").description("list deployments")).action(async (opts) => {
    const page = await callApi<{ resources: DeploymentView[] }>(
      connectionFromEnv(opts),
      "GET",
      "/v2/deployments?limit=100",
    );
    printTable(
      page.resources.map((d) => ({
        name: d.name,
        id: d.id,
        active: d.active_revision_id ?? "-",
        latest: d.latest_revision_id ?? "-",
        url: d.source_config.custom_url,
      })),
    );
  });
  addConnectionOptions(
    cmd.command("get <name-or-id>").description("show a deployment and its latest revisions"),
  ).action(async (ref: string, opts) => {
    const conn = connectionFromEnv(opts);
    const d = await resolveDeployment(conn, ref);
    console.log(JSON.stringify(d, null, 2));
    const revs = await callApi<{ resources: RevisionView[] }>(
      conn,
      "GET",
      `/v2/deployments/${d.id}/revisions?limit=10`,
    );
    printTable(
      revs.resources.map((r) => ({
        revision: r.id,
        status: r.status + (r.id === d.active_revision_id ? " (live)" : ""),
        created: r.created_at,
        message: r.status_message ?? "",
      })),
    );
  });
  addConnectionOptions(
    cmd
      .command("logs <name-or-id>")
      .description("print a revision's build log (default: the latest revision)")
      .option("--revision <id>", "revision id")
      .option("--deploy", "the deploy log (agent server output) instead of the build log"),
  ).action(async (ref: string, opts) => {
    const conn = connectionFromEnv(opts);
    const d = await resolveDeployment(conn, ref);
    const revision = opts.revision ?? d.latest_revision_id;
    if (!revision) throw new CliError(`${d.name} has no revision yet`);
    for (const line of await logLines(conn, d.id, revision, opts.deploy ? "deploy" : "build")) console.log(line);
  });
}

/** `deployments rollback`, `rm`. */
function addChangeCommands(cmd: Command): void {
  addConnectionOptions(
    cmd
      .command("rollback <name-or-id> [revision]")
      .description(
        "redeploy an earlier revision's build (default: the DEPLOYED revision before the live one) and wait for it",
      )
      .option("--no-wait", "return once the redeploy is queued"),
  ).action(async (ref: string, revision: string | undefined, opts) => {
    const conn = connectionFromEnv(opts);
    const d = await resolveDeployment(conn, ref);
    let target = revision;
    if (!target) {
      const revs = await callApi<{ resources: RevisionView[] }>(
        conn,
        "GET",
        `/v2/deployments/${d.id}/revisions?limit=100&status=DEPLOYED`,
      );
      target = revs.resources.find((r) => r.id !== d.active_revision_id && r.id < (d.active_revision_id ?? ""))?.id;
      if (!target) throw new CliError(`${d.name} has no earlier DEPLOYED revision to roll back to`);
    }
    const updated = await callApi<DeploymentView>(conn, "POST", `/v2/deployments/${d.id}/revisions/${target}/redeploy`);
    console.log(`redeploying the build of ${target} as revision ${updated.latest_revision_id}`);
    if (!opts.wait) return;
    const rev = await waitForRevision(conn, d.id, updated.latest_revision_id!, {
      timeoutMs: 900_000,
      print: (s) => console.log(s),
    });
    if (rev.status !== "DEPLOYED") {
      console.error(`rollback failed: ${rev.status}${rev.status_message ? `: ${rev.status_message}` : ""}`);
      process.exitCode = 1;
    }
  });
  addConnectionOptions(
    cmd.command("rm <name-or-id>").description("delete a deployment (stops its agent servers)"),
  ).action(async (ref: string, opts) => {
    const conn = connectionFromEnv(opts);
    const d = await resolveDeployment(conn, ref);
    await callApi(conn, "DELETE", `/v2/deployments/${d.id}`);
    console.log(`deleted ${d.name} (${d.id})`);
  });
}
