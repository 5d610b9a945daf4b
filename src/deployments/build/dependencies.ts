import crypto from "node:crypto";
import fs from "node:fs";
import path from "node:path";
import type { DeploymentsLayout } from "../layout.ts";
import type { RevisionLog } from "../store/revision-logs.ts";
import type { BuildStep } from "./builder.ts";
import { LOCKFILE_MAX, ProjectFileError, readProjectFile } from "./project-file.ts";

const LOCKFILES = ["package-lock.json", "npm-shrinkwrap.json"];

/**
 * The key of a project's installed dependencies: package.json, its lockfile, the install command
 * and the Node major version. Two builds with the same key share one `node_modules`.
 */
export function dependencyKey(projectDir: string, installCommand: string | null): string | null {
  const pkg = readProjectFile(projectDir, "package.json");
  if (pkg === null) return null;
  const h = crypto.createHash("sha256");
  h.update(pkg);
  for (const f of LOCKFILES) {
    const lock = readProjectFile(projectDir, f, LOCKFILE_MAX);
    if (lock !== null) h.update(f).update(lock);
  }
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
  opts: {
    layout: DeploymentsLayout;
    workspaceId: string;
    installCommand: string | null;
    log: RevisionLog;
    step: BuildStep;
    env: Record<string, string>;
  },
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
    // Relative: the same link resolves on the host and inside the confinement (other root).
    fs.symlinkSync(path.relative(projectDir, path.join(cached, "node_modules")), target, "dir");
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
    await opts.step({
      what: "install command",
      argv: ["/bin/sh", "-c", opts.installCommand],
      cwd: projectDir,
      env,
      writable: true,
    });
  } else {
    const args = hasLock
      ? ["ci", "--prefer-offline", "--no-audit", "--no-fund"]
      : ["install", "--prefer-offline", "--no-audit", "--no-fund", "--no-package-lock"];
    opts.log.line(`npm ${args.join(" ")}`);
    await opts.step({ what: "npm install", argv: ["/usr/bin/npm", ...args], cwd: projectDir, env, writable: true });
  }
  // The install ran as the project: its node_modules must be a real folder of the build, or root
  // would walk (and move into the shared cache) whatever a link there points at.
  const made = fs.lstatSync(target, { throwIfNoEntry: false });
  if (!made) fs.mkdirSync(target);
  else if (!made.isDirectory())
    throw new ProjectFileError(
      `the install left node_modules as ${made.isSymbolicLink() ? "a symbolic link" : "something other than a folder"}; refusing to use it`,
    );
  materializeLocalLinks(target, projectDir);
  const staging = `${cached}.${process.pid}.${Date.now()}`;
  fs.mkdirSync(staging, { recursive: true, mode: 0o755 });
  fs.renameSync(target, path.join(staging, "node_modules"));
  fs.writeFileSync(path.join(staging, ".complete"), new Date().toISOString());
  try {
    fs.renameSync(staging, cached);
  } catch (err) {
    // Another build made the same cache meanwhile: its copy is as good as ours.
    fs.rmSync(staging, { recursive: true, force: true });
    if (!fs.existsSync(path.join(cached, ".complete")))
      throw new Error(`dependency cache ${cached} is in an unexpected state`, { cause: err });
  }
  fs.symlinkSync(path.relative(projectDir, path.join(cached, "node_modules")), target, "dir");
  opts.log.line(`dependencies installed and cached as ${key}`);
  return { key, cached: false };
}

/**
 * npm links `file:` dependencies (`node_modules/x -> ../vendor/x`); once the tree moves into the
 * shared cache such a link points nowhere. Links into the project become copies; links outside it
 * stay broken on purpose (a build sees nothing of the platform's machine beyond itself).
 */
function materializeLocalLinks(nodeModules: string, projectDir: string): void {
  const entries = fs
    .readdirSync(nodeModules, { withFileTypes: true })
    .flatMap((e) =>
      e.isDirectory() && e.name.startsWith("@")
        ? fs.readdirSync(path.join(nodeModules, e.name), { withFileTypes: true }).map((s) => path.join(e.name, s.name))
        : [e.name],
    );
  for (const name of entries) {
    const link = path.join(nodeModules, name);
    if (!fs.lstatSync(link).isSymbolicLink()) continue;
    let real: string;
    try {
      real = fs.realpathSync(link);
    } catch {
      continue; // dangling already
    }
    if (!real.startsWith(projectDir + path.sep) || real.startsWith(nodeModules + path.sep)) continue;
    fs.rmSync(link);
    // Root copies a tree the project's own code wrote: never follow a link inside it (a link to
    // /etc/shadow must stay a link, which resolves to nothing inside the confinement).
    fs.cpSync(real, link, { recursive: true, dereference: false, verbatimSymlinks: true });
  }
}
