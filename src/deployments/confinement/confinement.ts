import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import type { Bind, Limits, MountPlan } from "../../confinement/index.ts";
import { WHARF_NODE_MODULES, WHARF_ROOT, type DeploymentsLayout } from "../layout.ts";

/**
 * What a deployment's confined processes see and may use. Decisions only (pure functions over
 * paths and the deployment's settings), so the mount plan is tested without root; the launcher
 * turns a plan into a running confinement.
 */

export type { Bind, MountPlan };

export class ConfinementError extends Error {}

/**
 * tsx's compile cache of the platform's own process (Wharf's sources already compiled), shown to
 * the confined process as its own cache through a throwaway overlay: agent servers start without
 * recompiling the runtime, and nothing they write reaches the platform's copy.
 */
export function compileCacheOverlay(): Array<{ lower: string; dest: string }> {
  const lower = path.join(os.tmpdir(), `tsx-${process.getuid?.() ?? 0}`);
  if (!fs.existsSync(lower) || /[,:=]/.test(lower)) return [];
  return [{ lower, dest: "/tmp/tsx-1000" }];
}

/** First host uid of deployments (sandboxes use 200000); each deployment gets its own above it. */
export const DEPLOYMENT_UID_BASE = 300_000;
export const DEPLOYMENT_UID_SPAN = 1_000_000;

/** Where inside the confinement the private state folder and the socket folder appear. */
export const STATE_INSIDE = "/state";
export const SOCKET_DIR_INSIDE = "/run/agent";
export const SOCKET_NAME = "agent.sock";
/**
 * Where `$WHARF_HOME/deployments` appears inside (only the parts a plan binds): the platform's
 * home path itself never exists inside. Relative structure is kept, so relative links still resolve.
 */
export const DEPLOYMENTS_INSIDE = "/deployment";

/**
 * Where Wharf's own runtime (the checkout or installed package: sources, dependencies, entry point)
 * appears inside: where it is installed on the host never shows (not even in the mount table).
 */
export const RUNTIME_INSIDE = "/opt/wharf";

/**
 * A host path under `$WHARF_HOME/deployments` or Wharf's runtime as a confined process sees it
 * (the more specific folder wins when one holds the other; other paths unchanged). A `file:` URL
 * (tsx's loader) is moved the same way.
 */
export function insidePath(layout: DeploymentsLayout, hostPath: string, runtimeRoot = WHARF_ROOT): string {
  if (hostPath.startsWith("file://"))
    return pathToFileURL(insidePath(layout, fileURLToPath(hostPath), runtimeRoot)).href;
  const moves = [
    { from: layout.root, to: DEPLOYMENTS_INSIDE },
    { from: runtimeRoot, to: RUNTIME_INSIDE },
  ].sort((a, b) => b.from.length - a.from.length);
  for (const { from, to } of moves) {
    if (hostPath === from) return to;
    if (hostPath.startsWith(from + path.sep)) return to + hostPath.slice(from.length);
  }
  return hostPath;
}

/**
 * Unix socket folders of running revisions. Kept short on purpose: a socket path has at most 107
 * bytes, and `$WHARF_HOME` may be long.
 */
export function socketRoot(): string {
  return process.getuid?.() === 0 ? "/run/wharf-deployments" : path.join(os.tmpdir(), "wharf-deployments");
}

/** Wharf's runtime, read-only: sources (the Python worker's too), dependencies, the entry point (below RUNTIME_INSIDE). */
export function runtimeBinds(): Bind[] {
  const binds: Bind[] = [];
  for (const p of ["src", "python", "node_modules", "bin", "package.json", "tsconfig.json"]) {
    const full = path.join(WHARF_ROOT, p);
    if (fs.existsSync(full)) binds.push({ src: full, dest: path.join(RUNTIME_INSIDE, p), copy: p.endsWith(".json") });
  }
  return binds;
}

/**
 * The links above every build and dependency set (`builds/node_modules` → Wharf's packages, the
 * `type: module` marker), recreated inside because their folders are not shown.
 */
function resolutionLinks(layout: DeploymentsLayout): MountPlan {
  return {
    binds: [
      {
        src: path.join(layout.builds, "package.json"),
        dest: insidePath(layout, path.join(layout.builds, "package.json")),
        copy: true,
      },
    ],
    symlinks: [
      {
        link: insidePath(layout, path.join(layout.builds, "node_modules")),
        target: insidePath(layout, WHARF_NODE_MODULES),
      },
      {
        link: insidePath(layout, path.join(layout.deps, "node_modules")),
        target: insidePath(layout, WHARF_NODE_MODULES),
      },
    ],
  };
}

/** A bind of a folder under the deployments root at its inside path, resolved below `beneath` without links. */
const under = (layout: DeploymentsLayout, src: string, beneath: string, rw = false): Bind => ({
  src,
  dest: insidePath(layout, src),
  rw,
  beneath,
});

/** A platform-made folder (state, socket, npm cache) whose own name is the only part to check. */
const own = (src: string, dest: string): Bind => ({ src, dest, rw: true, beneath: path.dirname(src) });

/** One dependency set: `deps/<workspace>/<key>` (the key is a hex digest, see dependencyKey). */
const DEP_KEY = /^[0-9a-f]{32}$/;

/**
 * What a project's `node_modules` link (written by the platform, but in a folder the project's own
 * build steps may change) may point at: the `node_modules` of one of its workspace's dependency
 * sets (that set is bound), or something inside the project (nothing to bind). Anything else
 * fails the build: a link repointed into a planted link, another workspace's set, the host.
 */
export function dependencyLinkTarget(input: {
  projectDir: string;
  artifactDir: string;
  layout: DeploymentsLayout;
  workspaceId: string;
  target: string;
}): { deps: string | null } | { problem: string } {
  const resolved = path.resolve(input.projectDir, input.target);
  if (resolved.startsWith(input.artifactDir + path.sep)) return { deps: null };
  const rel = path.relative(input.layout.depsFor(input.workspaceId), resolved).split(path.sep);
  if (rel.length === 2 && DEP_KEY.test(rel[0]) && rel[1] === "node_modules") return { deps: path.dirname(resolved) };
  return {
    problem: `the project's node_modules link was changed to point elsewhere than its installed dependencies (${input.target}); refusing to build or run it`,
  };
}

/** The installed dependencies a project links to (a folder of the shared cache), if any. */
export function linkedDependencies(input: {
  projectDir: string;
  artifactDir: string;
  layout: DeploymentsLayout;
  workspaceId: string;
}): string | null {
  let target: string;
  try {
    target = fs.readlinkSync(path.join(input.projectDir, "node_modules"));
  } catch {
    return null; // no link: no node_modules, or a real folder inside the build
  }
  const decided = dependencyLinkTarget({ ...input, target });
  if ("problem" in decided) throw new ConfinementError(decided.problem);
  return decided.deps;
}

/**
 * A revision's agent server: the build read-only, its dependencies read-only, state and socket
 * writable. The state folder is the deployment's disk image when it has one (a hard size).
 */
export function servePlan(input: {
  layout: DeploymentsLayout;
  workspaceId: string;
  artifactDir: string;
  projectDir: string;
  stateDir: string;
  stateImage?: string | null;
  socketDir: string;
}): MountPlan {
  const links = resolutionLinks(input.layout);
  const binds: Bind[] = [
    ...runtimeBinds(),
    ...links.binds,
    under(input.layout, input.artifactDir, input.layout.builds),
  ];
  const deps = linkedDependencies(input);
  if (deps) binds.push(under(input.layout, deps, input.layout.deps));
  if (!input.stateImage) binds.push(own(input.stateDir, STATE_INSIDE));
  binds.push({ ...own(input.socketDir, SOCKET_DIR_INSIDE), sockets: true });
  return {
    binds,
    symlinks: links.symlinks,
    overlays: compileCacheOverlay(),
    disk: input.stateImage ? { image: input.stateImage, dest: STATE_INSIDE } : null,
  };
}

/**
 * The host's npm, read-only, when it is newer than the one the base image's nodejs package ships
 * (`npm install -g npm` replaces files dpkg does not list). Public code, no secrets.
 */
function npmBinds(): Bind[] {
  const npm = "/usr/lib/node_modules/npm";
  return fs.existsSync(npm) ? [{ src: npm }] : [];
}

/**
 * A build step (install, build command, load check): the build writable while it is being made
 * (install and build commands) or read-only (the load check), the workspace's npm cache writable.
 */
export function buildPlan(input: {
  layout: DeploymentsLayout;
  workspaceId: string;
  artifactDir: string;
  projectDir: string;
  npmCache: string | null;
  writable: boolean;
}): MountPlan {
  const links = resolutionLinks(input.layout);
  const binds: Bind[] = [
    ...runtimeBinds(),
    ...npmBinds(),
    ...links.binds,
    under(input.layout, input.artifactDir, input.layout.builds, input.writable),
  ];
  const deps = linkedDependencies(input);
  if (deps) binds.push(under(input.layout, deps, input.layout.deps));
  if (input.npmCache) binds.push(own(input.npmCache, "/npm-cache"));
  return { binds, symlinks: links.symlinks, overlays: compileCacheOverlay() };
}

const MIB = 1024 * 1024;

/**
 * Cgroup limits from the deployment's `resource_spec` (LangSmith Deployment's fields): the limit
 * fields when given, else twice the request (its documented default), else 1 GiB and 2 CPUs.
 */
export function limitsFor(resourceSpec: Record<string, unknown> | null | undefined, pidsMax = 512): Limits {
  const num = (k: string) => {
    const v = resourceSpec?.[k];
    return typeof v === "number" && Number.isFinite(v) && v > 0 ? v : null;
  };
  const memMb = num("memory_limit_mb") ?? (num("memory_mb") !== null ? num("memory_mb")! * 2 : 1024);
  const cpus = num("cpu_limit") ?? (num("cpu") !== null ? num("cpu")! * 2 : 2);
  return {
    memBytes: Math.max(256, Math.round(memMb)) * MIB,
    cpuMillicores: Math.max(100, Math.round(cpus * 1000)),
    pidsMax,
  };
}

/** Build steps get at least 2 GiB: npm is hungrier than the server it installs for. */
export function buildLimits(serve: Limits): Limits {
  return { ...serve, memBytes: Math.max(serve.memBytes, 2048 * MIB), pidsMax: Math.max(serve.pidsMax, 1024) };
}
