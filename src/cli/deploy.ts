import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import type { Command } from "commander";
import * as tar from "tar";
import { callApi, CliError, connectionFromEnv, type Connection } from "./api-client.ts";
import { findByName, logLines, waitForRevision, type DeploymentView } from "./deployments.ts";
import { addConnectionOptions } from "./output.ts";
import { processEnvironment } from "../config/index.ts";

const NOT_PACKED = new Set(["node_modules", ".git", ".wharf", ".langgraph_api", ".env"]);

/** Packs a project folder into a gzipped tarball, without installs, VCS data or local env files. */
async function pack(dir: string): Promise<{ file: string; bytes: number }> {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), "wharf-deploy-")), "source.tar.gz");
  await tar.c(
    { gzip: true, cwd: dir, file, portable: true, filter: (p) => !p.split("/").some((part) => NOT_PACKED.has(part)) },
    ["."],
  );
  return { file, bytes: fs.statSync(file).size };
}

/** `--secret NAME=VALUE`, or `--secret NAME` to take the value from this environment. */
function parseSecrets(specs: string[]): Array<{ name: string; value: string }> {
  return specs.map((spec) => {
    const eq = spec.indexOf("=");
    if (eq > 0) return { name: spec.slice(0, eq), value: spec.slice(eq + 1) };
    const value = processEnvironment()[spec];
    if (value === undefined)
      throw new CliError(`--secret ${spec}: no value given and ${spec} is not set in the environment`);
    return { name: spec, value };
  });
}

async function upload(
  conn: Connection,
  existing: DeploymentView | null,
  dir: string,
  print: (s: string) => void,
): Promise<string> {
  const { file, bytes } = await pack(dir);
  try {
    print(`   packed ${dir} (${(bytes / 1024).toFixed(1)} KiB)`);
    const target = await callApi<{ upload_url: string; object_path: string }>(
      conn,
      "POST",
      existing ? `/v2/deployments/${existing.id}/upload-url` : "/v2/deployments/upload-url",
    );
    const res = await fetch(target.upload_url, {
      method: "PUT",
      headers: { "content-type": "application/gzip", "content-length": String(bytes) },
      body: fs.readFileSync(file),
    });
    if (!res.ok) throw new CliError(`upload failed with status ${res.status}: ${await res.text()}`);
    return target.object_path;
  } finally {
    fs.rmSync(path.dirname(file), { recursive: true, force: true });
  }
}

export function registerDeploy(program: Command): void {
  addConnectionOptions(
    program
      .command("deploy [dir]")
      .description(
        "create or update the deployment NAME from a langgraph.json project, wait until it is DEPLOYED and print its URL",
      )
      .requiredOption("--name <name>", "deployment name (created if it does not exist)")
      .option("--config <path>", "langgraph.json of the project, relative to dir", "langgraph.json")
      .option(
        "--secret <NAME[=VALUE]>",
        "a secret for the agent server's environment (repeatable; without =VALUE, taken from this environment)",
        (v: string, acc: string[]) => [...acc, v],
        [] as string[],
      )
      .option(
        "--local",
        "build from the folder on the server's machine instead of uploading it (an operator feature: the platform must list a folder above it in WHARF_DEPLOY_LOCAL_ROOTS)",
      )
      .option("--no-wait", "return once the revision is created")
      .option("--timeout <seconds>", "how long to wait for DEPLOYED", "900"),
  ).action(async (dirArg: string | undefined, opts) => {
    const conn = connectionFromEnv(opts);
    const dir = path.resolve(dirArg ?? ".");
    const print = (s: string) => console.log(s);
    if (!fs.existsSync(path.join(dir, opts.config)))
      throw new CliError(
        `${path.join(dir, opts.config)} not found: deploy a folder with a langgraph.json (or pass --config)`,
      );
    const secrets = parseSecrets(opts.secret as string[]);
    const started = Date.now();
    print(`1. Looking for deployment ${opts.name}`);
    const existing = await findByName(conn, opts.name);
    print(existing ? `   found ${existing.id}` : "   none: it will be created");
    const revisionConfig: Record<string, string> = { langgraph_config_path: opts.config };
    if (opts.local) {
      revisionConfig.local_path = dir;
    } else {
      print("2. Uploading the source");
      revisionConfig.source_tarball_path = await upload(conn, existing, dir, print);
    }
    print(existing ? "3. Updating the deployment" : "3. Creating the deployment");
    const deployment = existing
      ? await callApi<DeploymentView>(conn, "PATCH", `/v2/deployments/${existing.id}`, {
          source_revision_config: revisionConfig,
          ...(secrets.length ? { secrets } : {}),
        })
      : await callApi<DeploymentView>(conn, "POST", "/v2/deployments", {
          name: opts.name,
          source: "internal_source",
          source_config: { deployment_type: "dev" },
          source_revision_config: revisionConfig,
          secrets,
        });
    const revisionId = deployment.latest_revision_id!;
    print(`   deployment ${deployment.id}, revision ${revisionId}`);
    if (!opts.wait) {
      print(`   URL: ${deployment.source_config.custom_url}`);
      return;
    }
    print("4. Waiting for the revision");
    const rev = await waitForRevision(conn, deployment.id, revisionId, {
      timeoutMs: Number(opts.timeout) * 1000,
      print,
    });
    if (rev.status === "DEPLOYED") {
      print(`Deployment successful in ${((Date.now() - started) / 1000).toFixed(1)}s`);
      print(`   URL: ${deployment.source_config.custom_url}`);
      return;
    }
    console.error(`Deployment failed: ${rev.status}${rev.status_message ? `: ${rev.status_message}` : ""}`);
    const kind = rev.status === "DEPLOY_FAILED" ? "deploy" : "build";
    const tail = await logLines(conn, deployment.id, rev.id, kind, 40);
    if (tail.length) console.error(`--- last lines of the ${kind} log ---\n${tail.join("\n")}`);
    process.exitCode = 1;
  });
}
