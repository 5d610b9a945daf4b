import fs from "node:fs";
import type net from "node:net";
import path from "node:path";
import type { Kysely } from "kysely";
import {
  egressAvailable,
  egressCaptureSpec,
  prepareEgress,
  type PreparedEgress,
  type StoredProxyConfig,
} from "../../egress/index.ts";
import type { Logger } from "../../log/logger.ts";
import type { CapturedNetwork } from "../../confinement/index.ts";
import type { Database } from "../../store/schema.ts";
import type { Bind } from "../confinement/confinement.ts";
import {
  buildStepProxyConfig,
  egressBinds,
  egressMounts,
  type BuildStepTrust,
  type EgressMounts,
} from "../confinement/egress-plan.ts";

/**
 * A deployment's way out. Every agent server and build step of a revision gets the egress proxy
 * exactly like a sandbox: capture listeners in its network namespace (beside the data-plane
 * gateway), the proxy's environment, and the CA files shown read-only in its confinement. The
 * rules are the deployment's `proxy_config` (a build step's also allow its package registries); a
 * PATCH reaches every running process of the deployment at once.
 */

/** One confined process's egress, from before it is spawned until it exits. */
export interface ProcessEgress {
  /** Goes into the process's environment (proxy variables, CA bundle variables, rule env_vars). */
  env: Record<string, string>;
  /** Read-only binds for its mount plan (CA file, system bundle, compatibility credentials). */
  binds: Bind[];
  /** Listeners the confinement must open and hand over (added to its own, e.g. the gateway's). */
  capture: { tcpPorts: number[]; dns: boolean };
  /** In the confinement's `onNetwork`: attaches the proxy to the egress listeners it was handed. */
  attach(netnsPid: number, captured: CapturedNetwork | null): Promise<void>;
  /** When the process stopped (idempotent): detaches, forgets, removes its files. */
  close(): Promise<void>;
}

interface Entry {
  /** Rules for this process from the deployment's config (a build step adds its registries). */
  derive(stored: StoredProxyConfig | null): StoredProxyConfig | null;
  prepared: PreparedEgress | null;
  /** A PATCH that arrived before `prepared` existed. */
  latest: { stored: StoredProxyConfig | null } | null;
  rewriteFiles: () => void;
}

/** The listeners of `ports` (and the DNS sockets), taken out of what a confinement handed over. */
export function takeListeners(captured: CapturedNetwork, ports: number[]): CapturedNetwork {
  const tcp = new Map<number, net.Server>();
  for (const p of ports) {
    const l = captured.tcp.get(p);
    if (l) {
      tcp.set(p, l);
      captured.tcp.delete(p);
    }
  }
  const udp = captured.udp.splice(0);
  return { tcp, udp, errors: captured.errors };
}

async function readProxyConfigText(db: Kysely<Database>, deploymentId: string): Promise<string | null> {
  const row = await db
    .selectFrom("deployments")
    .select("proxy_config")
    .where("id", "=", deploymentId)
    .executeTakeFirst();
  return row?.proxy_config ?? null;
}

const parseStored = (text: string | null): StoredProxyConfig | null =>
  text ? (JSON.parse(text) as StoredProxyConfig) : null;

/** How often running processes re-read their deployment's proxy_config (a PATCH served by another platform process). */
export const PROXY_CONFIG_POLL_MS = 2000;

export class DeploymentEgress {
  private readonly live = new Map<string, Set<Entry>>();
  /** The config text each deployment's processes run with, to notice another process's PATCH. */
  private readonly applied = new Map<string, string | null>();
  private timer: NodeJS.Timeout | null = null;
  private warned = false;

  constructor(
    private readonly db: Kysely<Database>,
    /** Root-owned folder of the processes' egress files (`$WHARF_HOME/deployments/egress`). */
    private readonly filesRoot: string,
    /** What the confinement's base image has at an inside path. */
    private readonly baseHas: (insidePath: string) => "file" | "dir" | null,
    private readonly log: Logger,
  ) {}

  /**
   * Prepares a confined process's egress, or null when this platform runs no egress proxy (the
   * egress feature is not mounted: the namespace keeps loopback only, nothing gets out).
   * `registries`: allow-list entries a build step needs and what the platform trusts for it (null
   * for an agent server).
   */
  async open(p: {
    id: string;
    deploymentId: string;
    workspaceId: string;
    registries: { allow: string[]; trust: BuildStepTrust } | null;
    onUnplaced?: (paths: string[]) => void;
  }): Promise<ProcessEgress | null> {
    if (!egressAvailable()) {
      if (!this.warned)
        this.log.warn("the egress feature is not mounted: deployed code has no way out of its network namespace");
      this.warned = true;
      return null;
    }
    const reg = p.registries;
    const derive = (s: StoredProxyConfig | null) => (reg ? buildStepProxyConfig(s, reg.allow, reg.trust) : s);
    const dir = path.join(this.filesRoot, p.id);
    let mounts: EgressMounts = { writes: {}, binds: [], unplaced: [] };
    const entry: Entry = {
      derive,
      prepared: null,
      latest: null,
      rewriteFiles: () => rewrite(dir, mounts, entry.prepared?.files ?? {}),
    };
    // Registered before the config is read: a PATCH from now on reaches this process.
    const set = this.live.get(p.deploymentId) ?? new Set<Entry>();
    set.add(entry);
    this.live.set(p.deploymentId, set);
    this.watch();
    let closed = false;
    const close = async () => {
      if (closed) return;
      closed = true;
      set.delete(entry);
      if (set.size === 0 && this.live.get(p.deploymentId) === set) {
        this.live.delete(p.deploymentId);
        this.applied.delete(p.deploymentId);
      }
      // At once (the caller may not wait): the process that showed them is gone.
      fs.rmSync(dir, { recursive: true, force: true });
      await entry.prepared?.cancel().catch((err) => this.log.warn({ err, id: p.id }, "egress detach failed"));
    };
    try {
      const text = await readProxyConfigText(this.db, p.deploymentId);
      if (!this.applied.has(p.deploymentId)) this.applied.set(p.deploymentId, text);
      const stored = parseStored(text);
      const prepared = await prepareEgress({
        sandboxId: p.id,
        workspaceId: p.workspaceId,
        proxyConfig: derive(stored),
      });
      entry.prepared = prepared;
      if (entry.latest) await prepared.update(derive(entry.latest.stored));
      mounts = egressMounts(prepared.files, this.baseHas);
      if (mounts.unplaced.length) p.onUnplaced?.(mounts.unplaced);
      fs.rmSync(dir, { recursive: true, force: true });
      writeAll(dir, mounts.writes);
      const spec = await egressCaptureSpec();
      return {
        env: { ...prepared.env },
        binds: egressBinds(dir, mounts),
        capture: spec,
        attach: async (netnsPid, captured) => {
          const mine = captured ? takeListeners(captured, spec.tcpPorts) : null;
          await prepared.attach(netnsPid, mine);
          // Files a PATCH changed while the process was starting.
          entry.rewriteFiles();
        },
        close,
      };
    } catch (err) {
      await close();
      throw err;
    }
  }

  /**
   * A PATCH of the deployment's `proxy_config`: every running process of it gets the new rules now
   * (the next request on any connection reads them). Environment variables are fixed at a process's
   * start; files it already shows are rewritten in place.
   */
  async update(deploymentId: string, stored: StoredProxyConfig | null): Promise<void> {
    if (this.live.has(deploymentId)) this.applied.set(deploymentId, stored ? JSON.stringify(stored) : null);
    const entries = [...(this.live.get(deploymentId) ?? [])];
    await Promise.all(
      entries.map(async (e) => {
        if (!e.prepared) {
          e.latest = { stored };
          return;
        }
        await e.prepared.update(e.derive(stored));
        e.rewriteFiles();
      }),
    );
  }

  /**
   * With several platform processes on one PostgreSQL, a PATCH may land on another process than
   * the one running the revision: every few seconds the running deployments' configs are read
   * again (one query) and a changed one is applied here.
   */
  private watch(): void {
    if (this.timer) return;
    this.timer = setInterval(
      () => void this.poll().catch((err) => this.log.warn({ err }, "re-reading deployments' proxy_config failed")),
      PROXY_CONFIG_POLL_MS,
    );
    this.timer.unref();
  }

  private async poll(): Promise<void> {
    const ids = [...this.live.keys()];
    if (ids.length === 0) {
      if (this.timer) clearInterval(this.timer);
      this.timer = null;
      return;
    }
    const rows = await this.db
      .selectFrom("deployments")
      .select(["id", "proxy_config"])
      .where("id", "in", ids)
      .execute();
    for (const row of rows) {
      if (!this.live.has(row.id) || this.applied.get(row.id) === row.proxy_config) continue;
      if (this.applied.has(row.id)) await this.update(row.id, parseStored(row.proxy_config));
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

function writeAll(dir: string, writes: Record<string, string>): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
  for (const [rel, content] of Object.entries(writes)) {
    const file = path.join(dir, rel);
    fs.mkdirSync(path.dirname(file), { recursive: true, mode: 0o755 });
    fs.writeFileSync(file, content, { mode: 0o644 });
  }
}

/** Rewrites, in place (the bind shows the same inode), the shown files whose content changed. */
function rewrite(dir: string, mounts: EgressMounts, files: Record<string, string>): void {
  // Same placement as at the start: every path maps to the relative path it had then.
  const fresh = egressMounts(files, (p) => (p === "/usr/local" || p === "/etc/wharf" ? "dir" : "file")).writes;
  for (const rel of Object.keys(mounts.writes)) {
    if (!(rel in fresh) || fresh[rel] === mounts.writes[rel]) continue;
    try {
      fs.writeFileSync(path.join(dir, rel), fresh[rel]);
      mounts.writes[rel] = fresh[rel];
    } catch {
      /* the process is gone meanwhile */
    }
  }
}
