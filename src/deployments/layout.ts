import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** Wharf's own checkout: its `node_modules` serves projects without their own dependencies. */
export const WHARF_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const WHARF_BIN = path.join(WHARF_ROOT, "bin/wharf.js");
export const WHARF_NODE_MODULES = path.join(WHARF_ROOT, "node_modules");

/**
 * Where the deployments feature keeps its files under `$WHARF_HOME/deployments`:
 * `uploads/<workspace>/<id>.tar.gz` (source tarballs), `builds/<revision>/` (one checked-out and
 * installed project per revision, reused by redeploys), `deps/<hash>/node_modules` (installed
 * dependencies shared by a workspace's builds with the same package.json + lockfile, under
 * `deps/<workspace>/`; Python environments in `deps/<workspace>/python/<key>/`), `npm-cache/<workspace>/`, `state/<deployment>/` (the deployment's private
 * state folder: its own database), `scratch/` (the confinement launcher's).
 */
export class DeploymentsLayout {
  readonly root: string;
  constructor(home: string) {
    this.root = path.join(home, "deployments");
  }
  get uploads() {
    return path.join(this.root, "uploads");
  }
  get builds() {
    return path.join(this.root, "builds");
  }
  get deps() {
    return path.join(this.root, "deps");
  }
  get npmCache() {
    return path.join(this.root, "npm-cache");
  }
  /** Installed dependencies of one workspace's builds (install scripts are that workspace's code). */
  depsFor(workspaceId: string) {
    return path.join(this.deps, workspaceId);
  }
  /**
   * Python environments of one workspace's builds, one folder per key (`python-env-child.ts`):
   * created by a build step at the path the agent server sees them at, shown read-only afterwards.
   */
  pythonEnvsFor(workspaceId: string) {
    return path.join(this.depsFor(workspaceId), "python");
  }
  npmCacheFor(workspaceId: string) {
    return path.join(this.npmCache, workspaceId);
  }
  /** A deployment's private state folder (its database, its files): kept across revisions. */
  stateDir(deploymentId: string) {
    return path.join(this.root, "state", deploymentId);
  }
  /** Scratch folders of the confinement launcher (never shown inside). */
  get scratch() {
    return path.join(this.root, "scratch");
  }
  buildDir(revisionId: string) {
    return path.join(this.builds, revisionId);
  }
  uploadFile(objectPath: string) {
    return path.join(this.root, objectPath);
  }

  /**
   * Creates the folders and the `node_modules` links one level above every build and every
   * dependency set. Node's resolution walks up the tree, so a project's own dependencies win and
   * anything it does not install (`@langchain/langgraph`, `@langchain/core`, …) resolves to the
   * very copy Wharf's agent server uses, without a package.json in the project.
   */
  prepare(): void {
    for (const dir of [
      this.uploads,
      this.builds,
      this.deps,
      this.npmCache,
      path.join(this.root, "state"),
      this.scratch,
    ])
      fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
    // Projects without a package.json are ES modules (top-level await, `import`), as in `langgraph dev`.
    const marker = path.join(this.builds, "package.json");
    if (!fs.existsSync(marker)) fs.writeFileSync(marker, JSON.stringify({ private: true, type: "module" }) + "\n");
    for (const dir of [this.builds, this.deps]) {
      const link = path.join(dir, "node_modules");
      let current: string | null = null;
      try {
        current = fs.readlinkSync(link);
      } catch {
        /* missing */
      }
      if (current === WHARF_NODE_MODULES) continue;
      fs.rmSync(link, { force: true, recursive: true });
      fs.symlinkSync(WHARF_NODE_MODULES, link, "dir");
    }
  }
}
