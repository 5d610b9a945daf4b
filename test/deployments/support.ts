import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { TestContext } from "node:test";
import { fileURLToPath } from "node:url";
import type { RunnerCommand } from "../../src/deployments/runtime/agent-process.ts";
import { TSX_LOADER } from "../../src/deployments/build/builder.ts";
import { createDeploymentsFeature } from "../../src/deployments/feature.ts";
import type { DeploymentsOptions } from "../../src/deployments/rollout/options.ts";
import { allFeatures } from "../../src/platform/features.ts";
import type { Dialect } from "../../src/store/database.ts";
import { startTestPlatform, type TestPlatform } from "../support/platform.ts";

const here = path.dirname(fileURLToPath(import.meta.url));
export const FIXTURES = path.join(here, "fixtures");
export const FAKE_SERVER = path.join(FIXTURES, "fake-agent-server.ts");

/** Starts the fixture server instead of the real agent server. */
export const fakeRunner: RunnerCommand = (a) => ({
  command: process.execPath,
  args: [
    "--import",
    TSX_LOADER,
    FAKE_SERVER,
    "--project",
    a.projectDir,
    "--socket",
    a.socket,
    "--server-id",
    a.serverId,
  ],
});

/** Options that run the fixture server (shown read-only to its confinement). */
export const FAKE_RUNNER: DeploymentsOptions = { runnerCommand: fakeRunner, runnerBinds: [FAKE_SERVER] };

/** Host pids whose command line has `marker` as one argument (a deployment id: its servers). */
export function processesWithArg(marker: string): number[] {
  const pids: number[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (fs.readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").includes(marker)) pids.push(Number(name));
    } catch {
      /* exited meanwhile */
    }
  }
  return pids;
}

// Short polls keep tests quick; the time limits are only there to end a hung build, so they leave
// room for a loaded 2-core machine (a real npm install there can take a minute).
export const FAST: DeploymentsOptions = {
  pollIntervalMs: 200,
  buildTimeoutMs: 180_000,
  deployTimeoutMs: 90_000,
  drainTimeoutMs: 10_000,
};

/** A whole platform whose deployments run the fixture server (or the real one with `real: true`). */
export async function startDeploymentsPlatform(
  t: TestContext,
  opts: { dialect?: Dialect; options?: DeploymentsOptions; real?: boolean; env?: Record<string, string> } = {},
): Promise<TestPlatform | null> {
  const options = { ...FAST, ...(opts.real ? {} : FAKE_RUNNER), ...opts.options };
  // Only what deployments need: other features' start-up work would slow every test down.
  const features = allFeatures().filter((f) => f.name === "identity" || f.name === "secrets");
  features.push(createDeploymentsFeature(options));
  return startTestPlatform(t, { dialect: opts.dialect, features, logLevel: "info", env: opts.env });
}

/** A private copy of a fixture project (tests edit theirs). */
export function copyProject(t: TestContext, name: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `wharf-proj-${name}-`));
  fs.cpSync(path.join(FIXTURES, "projects", name), dir, { recursive: true });
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

export interface RevisionBody {
  id: string;
  status: string;
  status_message: string | null;
  source_revision_config: Record<string, unknown>;
}

const TERMINAL = new Set(["DEPLOYED", "CREATE_FAILED", "BUILD_FAILED", "DEPLOY_FAILED", "SKIPPED", "INTERRUPTED"]);

/** The quick-start poll: GET the revision until it reaches a terminal status. */
export async function pollRevision(
  p: TestPlatform,
  deploymentId: string,
  revisionId: string,
  timeoutMs = 180_000,
  headers: Record<string, string> = {},
): Promise<RevisionBody> {
  const deadline = Date.now() + timeoutMs;
  for (let resets = 0; ;) {
    let res: Response;
    try {
      res = await p.api(`/v2/deployments/${deploymentId}/revisions/${revisionId}`, { headers });
    } catch (err) {
      // The platform shares this process's event loop: a build's synchronous work can hold it past
      // the server's keep-alive timeout, whose timer then closes a kept-alive connection as this GET
      // reuses it (ECONNRESET). A GET is repeated, as HTTP clients repeat idempotent requests.
      if (!(err instanceof TypeError) || ++resets > 3) throw err;
      continue;
    }
    const body = (await res.json()) as RevisionBody;
    if (res.status !== 200) throw new Error(`GET revision answered ${res.status}: ${JSON.stringify(body)}`);
    if (TERMINAL.has(body.status)) return body;
    if (Date.now() > deadline) throw new Error(`revision ${revisionId} still ${body.status} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export async function logsOf(
  p: TestPlatform,
  deploymentId: string,
  revisionId: string,
  kind: "build" | "deploy",
): Promise<string> {
  const res = await p.api(`/v2/deployments/${deploymentId}/revisions/${revisionId}/${kind}_logs?limit=1000`);
  const body = (await res.json()) as { logs: Array<{ message: string }> };
  return body.logs.map((l) => l.message).join("\n");
}

/** A stateless run through the deployment's stable URL. */
export async function runWait(
  url: string,
  apiKey: string,
  text: string,
  graph = "echo",
): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${url}/runs/wait`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": apiKey },
    body: JSON.stringify({ assistant_id: graph, input: { messages: [{ role: "human", content: text }] } }),
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

export function lastMessage(body: Record<string, unknown>): string {
  const msgs = body.messages as Array<{ content: string }> | undefined;
  return String(msgs?.at(-1)?.content ?? JSON.stringify(body));
}

/**
 * A file of a running deployment's state folder. Confined, the folder is a disk image mounted only
 * in its servers' namespaces: read it there, through the live revision's server (its holder keeps
 * the image at `/run/wharf-service-disk`). Unconfined, the folder on the host.
 */
export async function stateFile(p: TestPlatform, deploymentId: string, name: string): Promise<string> {
  const dir = path.join(p.home, "deployments", "state", deploymentId);
  if (!fs.existsSync(path.join(dir, "disk.img"))) return path.join(dir, name);
  const d = await p.ctx.db
    .selectFrom("deployments")
    .select("active_revision_id")
    .where("id", "=", deploymentId)
    .executeTakeFirstOrThrow();
  const rev = await p.ctx.db
    .selectFrom("deployment_revisions")
    .select("pid")
    .where("id", "=", d.active_revision_id!)
    .executeTakeFirstOrThrow();
  return `/proc/${rev.pid}/root/run/wharf-service-disk/${name}`;
}
