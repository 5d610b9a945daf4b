import fs from "node:fs";
import type { RunnerCommand } from "../runtime/agent-process.ts";

/** How the rollout engine runs (tests shorten the times; defaults in `resolveOptions`). */
export interface DeploymentsOptions {
  /** How to start an agent server (default: `node bin/wharf.js agent-server …`). */
  runnerCommand?: RunnerCommand;
  /** Deadline of the build phase (fetch, install, load check). Default 10 minutes. */
  buildTimeoutMs?: number;
  /** Deadline of the deploy phase (start, /ok, health runs). Default 3 minutes. */
  deployTimeoutMs?: number;
  /** How long a replaced revision may keep serving requests in flight. Default 60 s. */
  drainTimeoutMs?: number;
  /** Work loop period: picks up work from other processes, heartbeats, supervises. Default 1 s. */
  pollIntervalMs?: number;
  /**
   * Lease of a rollout or a served revision; another process takes over once it expires. Default
   * 5 s, renewed every poll (1 s): shorter, a process stalled by load could see its own lease lapse
   * and start a revision's server a second time.
   */
  leaseMs?: number;
  /**
   * PostgreSQL: how long another process's presence lock must stay free before its work is taken
   * over without waiting for its lease (it takes the lock again within a fraction of this after a
   * dropped connection). Default 1 s, at most `leaseMs`.
   */
  presenceGraceMs?: number;
  /**
   * Run builds and agent servers confined (own uid, namespaces, cgroups; see confinement.ts).
   * Default: on wherever the host can (root with bubblewrap); `WHARF_DEPLOYMENT_ISOLATION=off` disables it.
   */
  isolation?: boolean;
  /** Host folders shown read-only to agent servers besides Wharf's runtime (tests: their fixture server). */
  runnerBinds?: string[];
  /** The environment the host's npm and pip are asked their registries in (tests: a user config of their own; default the platform's). */
  packageManagerEnv?: NodeJS.ProcessEnv | null;
}

export type Resolved = Required<DeploymentsOptions>;

/** The options with their defaults; `isolation` by the operator's setting and the host. */
export function resolveOptions(
  options: DeploymentsOptions,
  isolationSetting: "on" | "off" | undefined,
  defaultRunner: RunnerCommand,
): Resolved {
  return {
    runnerCommand: options.runnerCommand ?? defaultRunner,
    buildTimeoutMs: options.buildTimeoutMs ?? 10 * 60_000,
    deployTimeoutMs: options.deployTimeoutMs ?? 3 * 60_000,
    drainTimeoutMs: options.drainTimeoutMs ?? 60_000,
    pollIntervalMs: options.pollIntervalMs ?? 1000,
    leaseMs: options.leaseMs ?? 5_000,
    presenceGraceMs: Math.min(options.presenceGraceMs ?? 1000, options.leaseMs ?? 5_000),
    isolation: options.isolation ?? defaultIsolation(isolationSetting),
    runnerBinds: options.runnerBinds ?? [],
    packageManagerEnv: options.packageManagerEnv ?? null,
  };
}

/** Isolation is on wherever the host can confine (root, bubblewrap), unless turned off explicitly. */
function defaultIsolation(setting: "on" | "off" | undefined): boolean {
  if (setting === "off") return false;
  if (process.getuid?.() !== 0) return false;
  return fs.existsSync("/usr/bin/bwrap") || fs.existsSync("/bin/bwrap");
}
