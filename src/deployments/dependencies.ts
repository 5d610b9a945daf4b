import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { DeploymentsLayout } from "./layout.ts";
import type { RevisionLog } from "./revision-logs.ts";
import type { BuildStep } from "./builder.ts";

const LOCKFILES = ["package-lock.json", "npm-shrinkwrap.json"];

/**
 * The key of a project's installed dependencies: package.json, its lockfile, the install command
 * and the Node major version. Two builds with the same key share one `node_modules`.
 */
export function dependencyKey(projectDir: string, installCommand: string | null): string | null {
  const pkg = path.join(projectDir, "package.json");
  if (!fs.existsSync(pkg)) return null;
  const h = crypto.createHash("sha256");
  h.update(fs.readFileSync(pkg));
  for (const f of LOCKFILES) if (fs.existsSync(path.join(projectDir, f))) h.update(f).update(fs.readFileSync(path.join(projectDir, f)));
  h.update(`install:${installCommand ?? ""}`).update(`node:${process.versions.node.split(".")[0]}`);
  return h.digest("hex").slice(0, 32);
}

/**
 * Installs the project's dependencies once per key into the shared cache and links them into the
 * project. A project without package.json installs nothing: its imports resolve to Wharf's own
 * packages through the link above the builds folder.
 */
export async function installDependencies(
  projectDir: string,
  opts: { layout: DeploymentsLayout; workspaceId: string; installCommand: string | null; log: RevisionLog; step: BuildStep; env: Record<string, string> },
): Promise<{ key: string | null; cached: boolean }> {
  const key = dependencyKey(projectDir, opts.installCommand);
  const target = path.join(projectDir, "node_modules");
  if (!key) {
    opts.log.line("no package.json: nothing to install (imports resolve to the platform's packages)");
    return { key: null, cached: false };
  }
  // Per workspace: one workspace's install scripts never write what another workspace runs.
  const cached = path.join(opts.layout.depsFor(opts.workspaceId), key);
  if (fs.existsSync(path.join(cached, ".complete"))) {
    fs.rmSync(target, { recursive: true, force: true });
    fs.symlinkSync(path.join(cached, "node_modules"), target, "dir");
    opts.log.line(`dependencies ${key} are cached: reusing them`);
    return { key, cached: true };
  }
  // Install in place (relative `file:` dependencies resolve against the project), then move the
  // result into the cache. A concurrent build of the same key may win the rename: then use its copy.
  fs.rmSync(target, { recursive: true, force: true });
  const hasLock = LOCKFILES.some((f) => fs.existsSync(path.join(projectDir, f)));
  const env = { ...opts.env, npm_config_update_notifier: "false", npm_config_fund: "false", npm_config_audit: "false" };
  if (opts.installCommand) {
    opts.log.line(`running install command: ${opts.installCommand}`);
    await opts.step({ what: "install command", argv: ["/bin/sh", "-c", opts.installCommand], cwd: projectDir, env, writable: true });
  } else {
    const args = hasLock ? ["ci", "--prefer-offline", "--no-audit", "--no-fund"] : ["install", "--prefer-offline", "--no-audit", "--no-fund", "--no-package-lock"];
    opts.log.line(`npm ${args.join(" ")}`);
    await opts.step({ what: "npm install", argv: ["/usr/bin/npm", ...args], cwd: projectDir, env, writable: true });
  }
  if (!fs.existsSync(target)) fs.mkdirSync(target);
  const staging = `${cached}.${process.pid}.${Date.now()}`;
  fs.mkdirSync(staging, { recursive: true, mode: 0o755 });
  fs.renameSync(target, path.join(staging, "node_modules"));
  fs.writeFileSync(path.join(staging, ".complete"), new Date().toISOString());
  try {
    fs.renameSync(staging, cached);
  } catch {
    fs.rmSync(staging, { recursive: true, force: true });
    if (!fs.existsSync(path.join(cached, ".complete"))) throw new Error(`dependency cache ${cached} is in an unexpected state`);
  }
  fs.symlinkSync(path.join(cached, "node_modules"), target, "dir");
  opts.log.line(`dependencies installed and cached as ${key}`);
  return { key, cached: false };
}
