import fs from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import { releaseEgressValues, type EgressAttachment } from "../../egress/index.ts";
import type { StoredProxyConfig } from "../../egress/index.ts";
import { HttpError } from "../../http/errors.ts";
import { dataplaneError } from "../dataplane/dataplane-error.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { nowIso } from "../../store/database.ts";
import { CommandRegistry, type CommandSession } from "../dataplane/commands.ts";
import { Admissions } from "./capacity.ts";
import type { SpillBuffer } from "../dataplane/output-buffer.ts";
import { SANDBOX_USER, retryOutOfDescriptors } from "../../confinement/index.ts";
import type { RuntimeRef, SandboxDriver } from "../driver/driver.ts";
import { getSandbox, openEnv, transition, type SandboxRow } from "../store/sandbox-store.ts";
import type { SandboxStatus } from "../api/schemas.ts";
import type { SandboxSettings } from "../settings.ts";
import { LostCommands } from "./lost-commands.ts";
import { provision } from "./provision.ts";
import { reconcileAll } from "./reconcile.ts";
import { lifecycleTick } from "./lifecycle-loop.ts";
import { runWithInputIn, startCommandIn, type ExecParams } from "./exec.ts";
import { WarmPool, type WarmWant } from "./warm-pool.ts";

/** What the platform holds in memory for a running sandbox. */
export interface Live {
  ref: RuntimeRef;
  egress: EgressAttachment | null;
  env: Record<string, string>;
  lastActivity: number;
}

const BASE_ENV: Record<string, string> = {
  PATH: "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
  HOME: SANDBOX_USER.home,
  USER: SANDBOX_USER.name,
  LOGNAME: SANDBOX_USER.name,
  SHELL: "/bin/bash",
  LANG: "C.UTF-8",
  TERM: "xterm-256color",
};

/**
 * The sandbox lifecycle: provisioning → ready → stopped → (start) → ready, failed, deleting. Every
 * transition is a conditional update in the database; the driver does the work; the loop in
 * `tick` stops idle sandboxes, deletes long-stopped ones, fails transitions past their deadline
 * and notices sandboxes whose processes died. `reconcile` re-adopts running sandboxes after a restart.
 *
 * The acting parts live beside it by concern: `provision.ts`, `reconcile.ts`, `lifecycle-loop.ts`
 * (the acting edge of `nextAction`), `exec.ts` (commands). They share this class's in-memory state
 * (`live`, `inflight`, `busy`, `jobs`, …), which is why those members are not private; nothing
 * outside `lifecycle/` touches them.
 */
export class SandboxManager {
  readonly commands = new CommandRegistry();
  readonly live = new Map<string, Live>();
  readonly inflight = new Map<string, Promise<void>>();
  /** Sandboxes a stop or delete is working on: the lifecycle loop leaves them alone. */
  readonly busy = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private ticking = false;
  private prepared: Promise<void> | null = null;
  /** Sandboxes begun with default resources, waiting for a create to claim them. */
  readonly warm: WarmPool;
  /** While the platform re-adopts sandboxes after a start: data-plane calls wait for it, not 400. */
  private reconciling: Promise<void> | null = null;
  /** Background jobs (snapshots being built from images): shutdown waits for them briefly. */
  readonly jobs = new Set<Promise<void>>();
  /** Commands a previous platform process ran over WebSocket: their output files, by sandbox. */
  readonly lost: LostCommands;
  prepareError: Error | null = null;
  /** Admission against the host's capacity and the workspace's quotas: creates, starts and wakes. */
  readonly admissions: Admissions;

  constructor(
    readonly ctx: PlatformContext,
    readonly driver: SandboxDriver | null,
    readonly settings: SandboxSettings,
  ) {
    this.admissions = new Admissions(ctx.db, settings.stateDir, settings.admission, ctx.store.dialect);
    this.lost = new LostCommands(settings.stateDir, settings.maxOutputBytes);
    this.warm = new WarmPool(driver, settings, ctx.log, async () => {
      await this.prepare();
      return !this.prepareError;
    });
  }

  get db() {
    return this.ctx.db;
  }

  /** Host checks and the base image, once; later calls wait for the first. */
  prepare(): Promise<void> {
    this.prepared ??= (async () => {
      if (!this.driver) return;
      try {
        await this.driver.prepare();
        this.ctx.log.info({ driver: this.driver.describe() }, "sandbox driver ready");
      } catch (err) {
        this.prepareError = err as Error;
        this.ctx.log.error({ err }, "sandbox driver unavailable");
      }
    })();
    return this.prepared;
  }

  /** 503 with the reason (missing packages, not root, disabled) before anything is written. */
  async ensureAvailable(): Promise<void> {
    await this.prepare();
    this.requireDriver();
  }

  requireDriver(): SandboxDriver {
    if (!this.driver) throw new HttpError(503, "Sandboxes are disabled on this server (WHARF_SANDBOX_DRIVER=none)");
    if (this.prepareError)
      throw new HttpError(
        503,
        `Sandboxes are unavailable on this host: ${this.prepareError.message}`,
        {},
        {
          cause: this.prepareError,
        },
      );
    return this.driver;
  }

  /** Best-effort cleanup failed: say so (it is retried by the lifecycle loop or at the next start). */
  logFailure(what: string, sandboxId: string, err: unknown): void {
    this.ctx.log.warn({ sandboxId, err }, `sandbox ${what} failed`);
  }

  touch(id: string): void {
    const l = this.live.get(id);
    if (l) l.lastActivity = Date.now();
  }

  isLive(id: string): boolean {
    return this.live.has(id);
  }

  /** A warm sandbox for a create with default resources and no snapshot (see `WarmPool.claim`). */
  claimWarm(want: WarmWant): string | null {
    return this.warm.claim(want);
  }

  /** Warm sandboxes ready to be claimed (benchmarks wait for a full pool). */
  warmReady(): Promise<number> {
    return this.warm.ready();
  }

  /** Gives back a claimed warm sandbox whose create did not go through. */
  releaseWarm(id: string): Promise<void> {
    return this.warm.release(id);
  }

  /** Keeps a background job (an image pull) in view so shutdown can wait for it. */
  track(job: Promise<void>): void {
    this.jobs.add(job);
    void job.finally(() => this.jobs.delete(job));
  }

  /**
   * The image snapshot a sandbox's filesystem sits on (its own snapshot when that came from an
   * image, or the image under a captured snapshot), or null for the base.
   */
  async imageSnapshotOf(row: SandboxRow): Promise<string | null> {
    if (!row.snapshot_id) return null;
    const snap = await this.db
      .selectFrom("sandbox_snapshots")
      .select(["id", "docker_image", "base_snapshot_id"])
      .where("id", "=", row.snapshot_id)
      .executeTakeFirst();
    if (!snap) return null;
    return snap.docker_image ? snap.id : snap.base_snapshot_id;
  }

  /** Starts provisioning in the background (create and start); the row must be in `provisioning`. */
  launch(row: SandboxRow, snapshotArchive: string | null): void {
    const run = provision(this, row, snapshotArchive).finally(() => {
      this.inflight.delete(row.id);
      void this.warm.refill();
    });
    this.inflight.set(row.id, run);
  }

  /** Waits until the sandbox leaves `provisioning` or the time is up; returns the row as it is then. */
  async waitSettled(id: string, timeoutMs: number): Promise<SandboxRow | undefined> {
    const inflight = this.inflight.get(id);
    if (inflight) await Promise.race([inflight, new Promise((r) => setTimeout(r, timeoutMs).unref())]);
    return getSandbox(this.db, id);
  }

  /** Kills the sandbox's processes (the filesystem stays unless `destroy`). */
  async teardown(id: string, ref: RuntimeRef | null, destroy: boolean): Promise<void> {
    const l = this.live.get(id);
    this.live.delete(id);
    this.commands.forget(id);
    this.lost.forget(id);
    if (l?.egress)
      await l.egress.detach().catch((err) => this.ctx.log.warn({ sandboxId: id, err }, "egress detach failed"));
    const driver = this.driver;
    if (!driver) return;
    const r = ref ?? l?.ref ?? null;
    // Under a descriptor shortage (a flood of connections) reading /proc and the cgroup fails: wait
    // it out rather than give up with the sandbox's processes running and its row about to go.
    await retryOutOfDescriptors(() => (destroy ? driver.destroy(id, r) : driver.stop(id, r)), {
      onRetry: (err, attempt) =>
        this.ctx.log.warn({ sandboxId: id, attempt, err }, "sandbox teardown out of descriptors; retrying"),
    });
  }

  runtimeOf(row: SandboxRow): RuntimeRef | null {
    return this.live.get(row.id)?.ref ?? (row.runtime ? (JSON.parse(row.runtime) as RuntimeRef) : null);
  }

  async stop(row: SandboxRow, reason: string | null): Promise<SandboxRow | undefined> {
    this.busy.add(row.id);
    try {
      const ref = this.runtimeOf(row);
      const moved = await transition(this.db, row.id, ["ready", "provisioning"], "stopped", {
        runtime: null,
        stopped_at: nowIso(),
        status_message: reason,
      });
      if (moved) await this.teardown(row.id, ref, false);
      return moved;
    } finally {
      this.busy.delete(row.id);
    }
  }

  /** Deletes from any state: marks `deleting`, waits out a running provision, removes everything. */
  async delete(row: SandboxRow): Promise<void> {
    this.busy.add(row.id);
    try {
      await this.deleteNow(row);
    } finally {
      this.busy.delete(row.id);
    }
  }

  private async deleteNow(row: SandboxRow): Promise<void> {
    await this.db
      .updateTable("sandboxes")
      .set({ status: "deleting", status_changed_at: nowIso(), updated_at: nowIso() })
      .where("id", "=", row.id)
      .execute();
    const inflight = this.inflight.get(row.id);
    if (inflight) await Promise.race([inflight, new Promise((r) => setTimeout(r, 30_000).unref())]);
    await this.teardown(row.id, this.runtimeOf(row), true);
    await this.db.deleteFrom("sandboxes").where("id", "=", row.id).execute();
    if (row.proxy_config) await releaseEgressValues(this.db, row.workspace_id, JSON.parse(row.proxy_config));
  }

  /** Every command's environment: the base, the egress's (proxy, CA, cloud placeholders), the sandbox's own. */
  commandEnv(row: SandboxRow, egress: EgressAttachment | null): Record<string, string> {
    return { ...BASE_ENV, ...(egress?.env ?? {}), ...openEnv(this.ctx.box, row) };
  }

  /**
   * Applies a new proxy_config to a ready sandbox's live egress attachment. Commands started from
   * now on get the new environment (a cloud rule added by PATCH brings its placeholders), and the
   * files the new rules need are placed now: SDKs in the running sandbox work without a restart.
   */
  async updateEgress(row: SandboxRow, proxyConfig: StoredProxyConfig | null): Promise<void> {
    const l = this.live.get(row.id);
    if (!l?.egress || !this.driver) return;
    const before = { ...l.egress.files };
    await l.egress.update(proxyConfig);
    l.env = this.commandEnv(row, l.egress);
    const changed = Object.fromEntries(
      Object.entries(l.egress.files).filter(([file, content]) => before[file] !== content),
    );
    if (Object.keys(changed).length) this.driver.placeFiles(row.id, changed, this.driver.netnsPid(l.ref));
  }

  /**
   * Any data-plane request to a stopped sandbox starts it (LangSmith Deployment's clients rely on
   * it: boxes stop after their idle TTL). Waits while it provisions; returns the row as it is then.
   */
  async wake(row: SandboxRow, timeoutMs = 60_000): Promise<SandboxRow> {
    if (row.status === "ready" && this.live.has(row.id)) return row;
    if (this.reconciling) {
      // Just started: the sandbox may be running and about to be re-adopted. No "not ready" window.
      await this.reconciling;
      row = (await getSandbox(this.db, row.id)) ?? row;
      if (row.status === "ready" && this.live.has(row.id)) return row;
    }
    if (row.status === "stopped") {
      await this.ensureAvailable();
      const want = { memBytes: Number(row.mem_bytes), fsCapacityBytes: Number(row.fs_capacity_bytes), creates: false };
      const moved = await this.admissions.admitThen(row.workspace_id, want, () =>
        transition(this.db, row.id, ["stopped"], "provisioning", { runtime: null, status_message: null }),
      );
      if (moved) {
        this.ctx.log.info({ sandboxId: row.id }, "waking stopped sandbox for a data-plane request");
        this.launch(moved, null);
      }
    } else if (row.status !== "provisioning") return row;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const current = await this.waitSettled(row.id, Math.max(0, deadline - Date.now()));
      if (!current || current.status !== "provisioning" || Date.now() >= deadline) return current ?? row;
      // Another request moved it and has not registered its provisioning yet.
      await new Promise((r) => setTimeout(r, 10));
    }
  }

  /** The live sandbox for a data-plane call, or NotReady (400) as LangSmith Deployment answers. */
  requireLive(row: SandboxRow): Live {
    const l = this.live.get(row.id);
    if (row.status !== "ready" || !l)
      throw dataplaneError(400, "NotReady", `Sandbox ${row.name} is not ready (status: ${row.status})`);
    l.lastActivity = Date.now();
    return l;
  }

  /** Starts a command; its output is kept for reconnects. */
  startCommand(row: SandboxRow, p: ExecParams): CommandSession {
    return startCommandIn(this, row, p);
  }

  /** Runs a command to completion with the bytes given as stdin (file transfers). */
  runWithInput(
    row: SandboxRow,
    argv: string[],
    input: Buffer | Readable | null,
    onStdout?: (b: Buffer) => void,
  ): Promise<{ code: number; stderr: string }> {
    return runWithInputIn(this, row, argv, input, onStdout);
  }

  // ---- background work -------------------------------------------------------------------

  async startLoop(): Promise<void> {
    this.lost.find();
    this.warm.removeStale();
    await this.reconcile();
    // Their sandboxes' processes are gone: nobody reconnects to what they printed.
    for (const id of this.lost.sandboxes()) if (!this.live.has(id)) this.lost.forget(id);
    void this.warm.refill();
    this.timer = setInterval(() => void this.tick(), this.settings.tickMs);
    this.timer.unref();
  }

  /** After a restart: running sandboxes are re-adopted, dead ones are marked explicitly. */
  async reconcile(): Promise<void> {
    this.reconciling = reconcileAll(this);
    try {
      await this.reconciling;
    } finally {
      this.reconciling = null;
    }
  }

  async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      await lifecycleTick(this);
    } finally {
      this.ticking = false;
    }
  }

  async shutdown(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    await this.warm.drain();
    await Promise.race([
      Promise.allSettled([...this.inflight.values(), ...this.jobs]),
      new Promise((r) => setTimeout(r, 10_000).unref()),
    ]);
    for (const id of [...this.live.keys()]) {
      const row = await getSandbox(this.db, id);
      if (!this.settings.keepRunning && row)
        await this.stop(row, "Stopped when the platform shut down").catch((e) =>
          this.logFailure("stop at shutdown", id, e),
        );
      else {
        // Leave it running for the next start to re-adopt; only our side goes away. Its commands
        // end (nobody could read their output); what they printed stays for reconnecting clients.
        const l = this.live.get(id);
        this.commands.abandon(id);
        if (l?.egress) await l.egress.detach().catch((e) => this.logFailure("egress detach at shutdown", id, e));
        this.live.delete(id);
      }
    }
  }

  /** A command a previous platform process ran, with its output up to then (see LostCommands). */
  lostCommand(sandboxId: string, commandId: string): { stdout: SpillBuffer; stderr: SpillBuffer } | null {
    return this.lost.command(sandboxId, commandId);
  }

  /** Where WebSocket commands' output is kept for reconnects (removed with the command). */
  commandOutputDir(sandboxId: string): string {
    return this.lost.outputDir(sandboxId);
  }

  /** Paths of snapshot archives. */
  snapshotPath(snapshotId: string): string {
    return path.join(this.settings.stateDir, "snapshots", `${snapshotId}.tar.zst`);
  }

  removeSnapshotFile(snapshotId: string): void {
    fs.rmSync(this.snapshotPath(snapshotId), { force: true });
    fs.rmSync(path.join(this.settings.stateDir, "oci-images", snapshotId), { recursive: true, force: true });
  }

  /** The sandbox's runtime reference if it runs (for snapshots of a running sandbox). */
  runtimeRefOf(row: SandboxRow): RuntimeRef | null {
    return this.runtimeOf(row);
  }

  statusOf(row: SandboxRow): SandboxStatus {
    return row.status as SandboxStatus;
  }
}
