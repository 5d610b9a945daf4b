import path from "node:path";
import type { Bind } from "./confinement.ts";

/**
 * Decisions about a deployment's egress (pure, table-tested): which rules each confined process
 * gets, and how the egress attachment's files (the interception CA, the system bundle with it,
 * compatibility credentials) appear in a confinement whose `/usr` and `/etc` are read-only binds.
 */

/**
 * The egress target id of a revision's agent server and of its build steps: the same names as
 * their cgroups. Sandbox ids are bare UUIDs, so these never collide with a sandbox's, and the
 * `dep-` prefix is what the egress audit log shows for a deployment.
 */
export const serverEgressId = (revisionId: string) => `dep-${revisionId}`;
export const buildEgressId = (revisionId: string) => `dep-build-${revisionId}`;

/** What the platform adds to a build step's rules besides its registries (never from a `proxy_config`). */
export interface BuildStepTrust {
  /** The host's registries, which the operator allows at internal addresses. */
  internalHosts: string[];
  /** CA files the host's package managers trust, trusted upstream for this step. */
  upstreamCaFiles: string[];
}

/**
 * A build step's rules: the deployment's `proxy_config` (header rules, credentials, deny_list) with
 * the package registries the build needs added to an `allow_list`, so a config written for the
 * agent (`allow_list: ["api.openai.com"]`) still installs its dependencies. A deny_list is kept as
 * written: a registry the owner denied stays denied. No config: the default posture, which already
 * reaches every registry on 80/443. `trust` (the host's registries at internal addresses, their CA
 * files) goes into platform-only fields the proxy reads for this step alone.
 */
export function buildStepProxyConfig<T>(
  stored: T,
  registries: string[],
  trust: BuildStepTrust = { internalHosts: [], upstreamCaFiles: [] },
): T {
  const extra = {
    ...(trust.internalHosts.length ? { internal_hosts: trust.internalHosts } : {}),
    ...(trust.upstreamCaFiles.length ? { upstream_ca_files: trust.upstreamCaFiles } : {}),
  };
  const withTrust = (cfg: T): T =>
    Object.keys(extra).length
      ? ({ ...(cfg ?? { version: 1, rules: [], callbacks: [], access_control: null, no_proxy: [] }), ...extra } as T)
      : cfg;
  if (!stored || typeof stored !== "object" || registries.length === 0) return withTrust(stored);
  const ac = (stored as { access_control?: unknown }).access_control as { allow_list?: unknown } | null | undefined;
  if (!ac || !Array.isArray(ac.allow_list)) return withTrust(stored);
  const allow = [...new Set([...(ac.allow_list as string[]), ...registries])];
  return withTrust({ ...stored, access_control: { allow_list: allow } });
}

/** Where the egress files of one process are mounted from (a root-owned folder of the platform's). */
export interface EgressMounts {
  /** Files to write under the process's egress folder: relative path → content. */
  writes: Record<string, string>;
  /** Binds of entries of that folder (`src` relative to it). */
  binds: Array<{ rel: string; dest: string }>;
  /** Paths that have no place to appear (a missing folder under a read-only tree). */
  unplaced: string[];
}

/**
 * Folders of the base image that hold nothing of the base's own (`/usr/local`: an empty `bin/`,
 * kept; `/etc/wharf`: Wharf's, for the Google compatibility file): a folder of the egress folder
 * replaces each whole, so files can appear in them although the trees around are read-only.
 */
const OWN_FOLDERS: Array<{ dir: string; rel: string; keep: string[] }> = [
  { dir: "/usr/local", rel: "usr-local", keep: ["bin/.keep"] },
  { dir: "/etc/wharf", rel: "etc-wharf", keep: [] },
];
/** Top folders that exist only on the confinement's own root (tmpfs): bubblewrap creates mount points there. */
const ON_ROOT = ["/home/", "/root/"];

/**
 * How each file of an attachment is shown: under `/usr/local` (the CA under
 * `share/ca-certificates`, a folder the base image lacks) or `/etc/wharf` (when the base image has
 * it) through one bind of a whole folder; a file the
 * base image has (`/etc/ssl/certs/ca-certificates.crt`, `/etc/resolv.conf`) by a file bind over
 * it; a file under `/home` or `/root` by a file bind whose parents bubblewrap creates; anything
 * else (a new file under `/etc` or `/usr`) cannot appear on the read-only trees and is reported.
 */
export function egressMounts(
  files: Record<string, string>,
  baseHas: (insidePath: string) => "file" | "dir" | null,
): EgressMounts {
  const out: EgressMounts = { writes: {}, binds: [], unplaced: [] };
  const folders = new Set<(typeof OWN_FOLDERS)[number]>();
  for (const [file, content] of Object.entries(files)) {
    const p = path.posix.normalize(file);
    if (!path.posix.isAbsolute(p) || p.split("/").includes("..")) {
      out.unplaced.push(file);
      continue;
    }
    const own = OWN_FOLDERS.find((f) => p.startsWith(f.dir + "/") && baseHas(f.dir) === "dir");
    if (own) {
      out.writes[path.posix.join(own.rel, p.slice(own.dir.length + 1))] = content;
      folders.add(own);
      continue;
    }
    const rel = path.posix.join("files", p.slice(1));
    if (baseHas(p) === "file" || ON_ROOT.some((r) => p.startsWith(r))) {
      out.writes[rel] = content;
      out.binds.push({ rel, dest: p });
    } else out.unplaced.push(file);
  }
  for (const f of OWN_FOLDERS.filter((o) => folders.has(o)).reverse()) {
    for (const k of f.keep) out.writes[path.posix.join(f.rel, k)] = "";
    out.binds.unshift({ rel: f.rel, dest: f.dir });
  }
  return out;
}

/** The binds of an egress folder on the host, for a mount plan (read-only). */
export function egressBinds(hostDir: string, mounts: EgressMounts): Bind[] {
  return mounts.binds.map((b) => ({ src: path.join(hostDir, b.rel), dest: b.dest, beneath: hostDir }));
}
