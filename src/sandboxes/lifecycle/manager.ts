import fs from "node:fs";
import path from "node:path";
import { Readable } from "node:stream";
import { attachEgress, egressCaptureSpec, releaseEgressValues, type EgressAttachment } from "../../egress/index.ts";
import type { StoredProxyConfig } from "../../egress/index.ts";
import { HttpError } from "../../http/errors.ts";
import type { PlatformContext } from "../../platform/context.ts";
import { nowIso } from "../../store/database.ts";
import { newId } from "../../store/ids.ts";
import { CommandRegistry, CommandSession, type CommandOptions } from "../dataplane/commands.ts";
import { Admissions } from "./capacity.ts";
import { SpillBuffer } from "../dataplane/output-buffer.ts";
import { SANDBOX_USER, retryOutOfDescriptors } from "../../confinement/index.ts";
import type { CapturedNetwork, RuntimeRef, SandboxDriver } from "../driver/driver.ts";
import {
  getSandbox,
  markLostSandboxes,
  openEnv,
  ownersOfSandboxes,
  sandboxesInStatus,
  transition,
  type SandboxRow,
} from "../store/sandbox-store.ts";
import { leftBehind } from "./left-behind.ts";
import type { SandboxStatus } from "../api/schemas.ts";
import type { SandboxSettings } from "../settings.ts";
import { LostCommands } from "./lost-commands.ts";
import { WarmPool, type WarmWant } from "./warm-pool.ts";
import { nextAction, type LifecycleAction, type LifecycleFacts } from "./lifecycle-decision.ts";

/** What the platform holds in memory for a running sandbox. */
interface Live {
  ref: RuntimeRef;
  egress: EgressAttachment | null;
  env: Record<string, string>;
  lastActivity: number;
}

export interface ExecParams {
  command: string;
  shell: string;
  env?: Record<string, string>;
  cwd?: string;
  commandId?: string;
  /** A pseudo-terminal of this size (WebSocket `pty: true`). */
  tty?: { rows: number; cols: number };
  options: CommandOptions;
}

/** A data-plane error with LangSmith Deployment's `{"detail":{"error","message"}}` body. */
export function dataplaneError(status: number, error: string, message: string): HttpError {
  return new HttpError(status, { error, message });
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
 */
export class SandboxManager {
  readonly commands = new CommandRegistry();
  private live = new Map<string, Live>();
  private inflight = new Map<string, Promise<void>>();
  /** Sandboxes a stop or delete is working on: the lifecycle loop leaves them alone. */
  private busy = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private ticking = false;
  private prepared: Promise<void> | null = null;
  /** Sandboxes begun with default resources, waiting for a create to claim them. */
  private readonly warm: WarmPool;
  /** While the platform re-adopts sandboxes after a start: data-plane calls wait for it, not 400. */
  private reconciling: Promise<void> | null = null;
  /** Background jobs (snapshots being built from images): shutdown waits for them briefly. */
  private jobs = new Set<Promise<void>>();
  /** Commands a previous platform process ran over WebSocket: their output files, by sandbox. */
  private readonly lost: LostCommands;
  private prepareError: Error | null = null;
  /** Admission against the host's capacity and the workspace's quotas: creates, starts and wakes. */
  readonly admissions: Admissions;

  constructor(
    private readonly ctx: PlatformContext,
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

  private get db() {
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

  private requireDriver(): SandboxDriver {
    if (!this.driver) throw new HttpError(503, "Sandboxes are disabled on this server (WHARF_SANDBOX_DRIVER=none)");
    if (this.prepareError)
      throw new HttpError(503, `Sandboxes are unavailable on this host: ${this.prepareError.message}`);
    return this.driver;
  }

  /** Best-effort cleanup failed: say so (it is retried by the lifecycle loop or at the next start). */
  private logFailure(what: string, sandboxId: string, err: unknown): void {
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
    const run = this.provision(row, snapshotArchive).finally(() => {
      this.inflight.delete(row.id);
      void this.warm.refill();
    });
    this.inflight.set(row.id, run);
  }

  private async provision(row: SandboxRow, snapshotArchive: string | null): Promise<void> {
    let ref: RuntimeRef | null = null;
    let egress: EgressAttachment | null = null;
    try {
      // Replica mode: whoever provisions it runs it, so its data plane is forwarded here.
      if (this.ctx.cluster)
        await this.db
          .updateTable("sandboxes")
          .set({ owner_replica: this.ctx.cluster.replicaId })
          .where("id", "=", row.id)
          .execute();
      await this.prepare();
      const driver = this.requireDriver();
      const proxyConfig = row.proxy_config ? (JSON.parse(row.proxy_config) as StoredProxyConfig) : null;
      const image = await this.imageSnapshotOf(row);
      const lowerDir = image ? path.join(this.settings.stateDir, "oci-images", image, "bundle", "rootfs") : undefined;
      if (lowerDir && !fs.existsSync(lowerDir))
        throw new Error("the image this sandbox was made from is no longer on this host");
      const parked = await this.warm.take(row.id);
      const spec = {
        id: row.id,
        workspaceId: row.workspace_id,
        cpuMillicores: row.cpu_millicores,
        memBytes: Number(row.mem_bytes),
        fsCapacityBytes: Number(row.fs_capacity_bytes),
        snapshotArchive,
        lowerDir,
        capture: await egressCaptureSpec(),
      };
      const hooks = {
        onNetwork: async (netnsPid: number, captured: CapturedNetwork | null) => {
          egress = await attachEgress({
            sandboxId: row.id,
            workspaceId: row.workspace_id,
            netnsPid,
            proxyConfig,
            captured,
          });
          if (Object.keys(egress.files).length) driver.placeFiles(row.id, egress.files, netnsPid);
        },
      };
      ref = parked && driver.finish ? await driver.finish(parked, hooks) : await driver.start(spec, hooks);
      const env = this.commandEnv(row, egress);
      this.live.set(row.id, { ref, egress, env, lastActivity: Date.now() });
      // Ready means an exec succeeds now. On the base image the driver's start already proved it
      // (bubblewrap's keeper runs inside every namespace, after the mounts and seccomp, which is all
      // an exec enters); an image may lack what an exec needs, so there an exec proves it. The
      // probe costs 15-60 ms of create → ready on a loaded host.
      if (lowerDir) {
        const probe = await this.runToCompletion(row.id, ["/bin/sh", "-c", ":"], 10);
        if (probe !== 0) throw new Error(`readiness probe exited with ${probe} (does the image have /bin/sh?)`);
      }
      const updated = await transition(this.db, row.id, ["provisioning"], "ready", {
        runtime: JSON.stringify(ref),
        stopped_at: null,
      });
      if (!updated) {
        // Deleted or failed (deadline) meanwhile: do not leave processes behind.
        await this.teardown(row.id, ref, false);
      }
    } catch (err) {
      const message = (err as Error).message;
      this.ctx.log.warn({ sandboxId: row.id, err }, "sandbox provisioning failed");
      await this.teardown(row.id, ref, false).catch((e) =>
        this.logFailure("teardown after a failed provision", row.id, e),
      );
      if (egress)
        await (egress as EgressAttachment)
          .detach()
          .catch((e) => this.logFailure("egress detach after a failed provision", row.id, e));
      await transition(this.db, row.id, ["provisioning"], "failed", {
        status_message: `Provisioning failed: ${message}`,
        runtime: null,
      });
    }
  }

  private async runToCompletion(id: string, argv: string[], timeoutSeconds: number): Promise<number> {
    const l = this.live.get(id)!;
    const proc = this.driver!.exec(id, l.ref, { argv, env: l.env, cwd: SANDBOX_USER.home });
    proc.stdin.end();
    proc.stdout.resume();
    proc.stderr.resume();
    const t = setTimeout(() => proc.kill(), timeoutSeconds * 1000);
    try {
      return await proc.exited;
    } finally {
      clearTimeout(t);
    }
  }

  /** Waits until the sandbox leaves `provisioning` or the time is up; returns the row as it is then. */
  async waitSettled(id: string, timeoutMs: number): Promise<SandboxRow | undefined> {
    const inflight = this.inflight.get(id);
    if (inflight) await Promise.race([inflight, new Promise((r) => setTimeout(r, timeoutMs).unref())]);
    return getSandbox(this.db, id);
  }

  /** Kills the sandbox's processes (the filesystem stays unless `destroy`). */
  private async teardown(id: string, ref: RuntimeRef | null, destroy: boolean): Promise<void> {
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

  private runtimeOf(row: SandboxRow): RuntimeRef | null {
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
  private commandEnv(row: SandboxRow, egress: EgressAttachment | null): Record<string, string> {
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
    const l = this.requireLive(row);
    const id = p.commandId ?? newId();
    if (this.commands.get(row.id, id)) throw dataplaneError(409, "CommandError", `Command id ${id} is already in use`);
    const env = { ...l.env, ...(p.env ?? {}), WHARF_FSIZE_LIMIT: String(Number(row.fs_capacity_bytes)) };
    const proc = this.driver!.exec(row.id, l.ref, {
      argv: [p.shell, "-c", p.command],
      env,
      cwd: p.cwd || SANDBOX_USER.home,
      tty: p.tty,
    });
    const session = new CommandSession(id, row.id, proc, p.options);
    this.commands.add(session);
    void session.done.then(() => this.touch(row.id));
    return session;
  }

  /** Runs a command to completion with the bytes given as stdin (file transfers). */
  async runWithInput(
    row: SandboxRow,
    argv: string[],
    input: Buffer | Readable | null,
    onStdout?: (b: Buffer) => void,
  ): Promise<{ code: number; stderr: string }> {
    const l = this.requireLive(row);
    const proc = this.driver!.exec(row.id, l.ref, {
      argv,
      env: { ...l.env, WHARF_FSIZE_LIMIT: String(Number(row.fs_capacity_bytes)) },
      cwd: SANDBOX_USER.home,
    });
    proc.stdin.on("error", () => {
      // EPIPE once the command exited without reading all its input: its exit code and stderr say why.
    });
    if (input instanceof Readable) {
      // A broken input (client gone, truncated form) kills the command before it sees end-of-file,
      // so a partial upload is never committed as if it were whole.
      input.once("error", () => proc.kill());
      input.pipe(proc.stdin);
    } else proc.stdin.end(input ?? undefined);
    let stderr = "";
    proc.stderr.on("data", (d: Buffer) => (stderr.length < 4000 ? (stderr += d.toString()) : undefined));
    if (onStdout) proc.stdout.on("data", onStdout);
    else proc.stdout.resume();
    const ended = new Promise<void>((r) => proc.stdout.on("close", () => r()));
    const code = await proc.exited;
    await Promise.race([ended, new Promise((r) => setTimeout(r, 200))]);
    return { code, stderr };
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
    this.reconciling = this.reconcileAll();
    try {
      await this.reconciling;
    } finally {
      this.reconciling = null;
    }
  }

  /** Sandboxes are re-adopted concurrently (each is an egress attach and a few /proc reads). */
  private async reconcileAll(): Promise<void> {
    const rows = await sandboxesInStatus(
      this.db,
      this.ctx.cluster ? ["provisioning", "ready", "deleting", "error"] : ["provisioning", "ready", "deleting"],
      this.ctx.cluster?.replicaId,
    );
    if (rows.length) await this.prepare();
    const queue = [...rows];
    const worker = async () => {
      for (let row = queue.shift(); row; row = queue.shift()) await this.reconcileOne(row);
    };
    await Promise.all(Array.from({ length: Math.min(16, queue.length) }, worker));
    if (this.ctx.cluster) await this.removeLeftBehind(this.ctx.cluster.replicaId);
  }

  /**
   * Replicas: what this replica left of sandboxes deleted through another while it was dead (or
   * started afresh on another) is removed when it comes back: their processes, if any outlived
   * it, and their folders. The folders are listed before the rows are read, so a sandbox being
   * created meanwhile (its row comes first) is never taken for one left behind.
   */
  private async removeLeftBehind(me: string): Promise<void> {
    const boxes = path.join(this.settings.stateDir, "boxes");
    let ids: string[];
    try {
      // Warm sandboxes have no row yet: the warm pool's removeStale deals with those.
      ids = fs.readdirSync(boxes).filter((id) => !fs.existsSync(path.join(boxes, id, ".warm")));
    } catch {
      return; // no sandboxes here yet
    }
    for (const id of leftBehind(ids, await ownersOfSandboxes(this.db, ids), me)) {
      try {
        await this.driver?.destroy(id, null);
        fs.rmSync(this.commandOutputDir(id), { recursive: true, force: true });
        this.ctx.log.info(
          { sandboxId: id },
          "removed a sandbox left behind while this replica was away (deleted or started on another replica)",
        );
      } catch (err) {
        this.logFailure("removal of a sandbox left behind", id, err);
      }
    }
  }

  private async reconcileOne(row: SandboxRow): Promise<void> {
    {
      try {
        const ref = row.runtime ? (JSON.parse(row.runtime) as RuntimeRef) : null;
        if (row.status === "deleting") {
          await this.delete(row);
        } else if (row.status === "error") {
          // Reported lost while this replica was away: end what is left of it, keep its files.
          if (ref && this.driver)
            await this.driver
              .stop(row.id, ref)
              .catch((e) => this.logFailure("stop of a sandbox reported lost", row.id, e));
          await transition(this.db, row.id, ["error"], "stopped", {
            runtime: null,
            stopped_at: nowIso(),
            status_message:
              "Its replica came back after the sandbox was reported lost; its files are kept, start it again",
          });
        } else if (row.status === "provisioning") {
          if (ref && this.driver)
            await this.driver
              .stop(row.id, ref)
              .catch((e) => this.logFailure("stop of a half-provisioned sandbox", row.id, e));
          await transition(this.db, row.id, ["provisioning"], "failed", {
            status_message: "The platform restarted while the sandbox was provisioning",
            runtime: null,
          });
        } else if (ref && this.driver && !this.prepareError && this.driver.isRunning(ref)) {
          const proxyConfig = row.proxy_config ? (JSON.parse(row.proxy_config) as StoredProxyConfig) : null;
          let egress: EgressAttachment;
          try {
            // The listeners are opened by a small helper in the sandbox's namespace (no Node start-up per box).
            const spec = await egressCaptureSpec();
            const captured = spec && this.driver.captureNetwork ? await this.driver.captureNetwork(ref, spec) : null;
            egress = await attachEgress({
              sandboxId: row.id,
              workspaceId: row.workspace_id,
              netnsPid: this.driver.netnsPid(ref),
              proxyConfig,
              captured,
            });
          } catch (err) {
            // Never leave a sandbox running without its egress: stop it, say why, keep its files.
            await this.driver.stop(row.id, ref).catch((e) => this.logFailure("stop without egress", row.id, e));
            await transition(this.db, row.id, ["ready"], "stopped", {
              runtime: null,
              stopped_at: nowIso(),
              status_message: `Stopped at platform start: the egress proxy could not be re-attached (${(err as Error).message}); start it again`,
            });
            return;
          }
          const env = this.commandEnv(row, egress);
          this.live.set(row.id, { ref, egress, env, lastActivity: Date.now() });
          // Their output had nowhere to go: end them; a reconnecting client is told why.
          const ended = this.driver.endOrphanedCommands?.(row.id, ref) ?? 0;
          this.ctx.log.info({ sandboxId: row.id, commandsEnded: ended }, "sandbox re-adopted after restart");
        } else {
          if (this.driver)
            await this.driver
              .stop(row.id, ref)
              .catch((e) => this.logFailure("cleanup of a sandbox whose processes are gone", row.id, e));
          await transition(this.db, row.id, ["ready"], "stopped", {
            runtime: null,
            stopped_at: nowIso(),
            status_message:
              "The sandbox's processes were gone when the platform started (host reboot or crash); its files are kept",
          });
        }
      } catch (err) {
        this.ctx.log.error({ sandboxId: row.id, err }, "sandbox reconcile failed");
      }
    }
  }

  async tick(): Promise<void> {
    if (this.ticking) return;
    this.ticking = true;
    try {
      this.commands.purge();
      const now = Date.now();
      // A snapshot is written inside its request; one still `building` long after was cut short (restart).
      const stale = new Date(now - this.settings.provisionDeadlineMs).toISOString();
      // Image pulls run for as long as they need while this process lives; a restart ends them.
      const pulling = this.jobs.size > 0;
      await this.db
        .updateTable("sandbox_snapshots")
        .set({
          status: "failed",
          status_message: "Snapshot did not finish (the platform stopped while writing it)",
          updated_at: nowIso(),
        })
        .where("status", "=", "building")
        .where("updated_at", "<", stale)
        .where((eb) => (pulling ? eb("docker_image", "is", null) : eb.lit(true)))
        .execute();
      if (this.ctx.cluster) {
        const lost = await markLostSandboxes(this.db, await this.ctx.cluster.deadReplicas());
        if (lost) this.ctx.log.warn({ sandboxes: lost }, "sandboxes of a dead replica reported as error");
      }
      // Replica mode: each replica looks after the sandboxes it runs, and only those.
      const rows = await sandboxesInStatus(
        this.db,
        ["provisioning", "ready", "stopped", "deleting"],
        this.ctx.cluster?.replicaId,
      );
      const times = {
        provisionDeadlineMs: this.settings.provisionDeadlineMs,
        deleteDeadlineMs: this.settings.deleteDeadlineMs,
        ttlSecondMs: this.settings.ttlSecondMs,
      };
      for (const row of rows) await this.act(row, nextAction(this.factsOf(row), now, times), now);
    } catch (err) {
      this.ctx.log.error({ err }, "sandbox lifecycle tick failed");
    } finally {
      this.ticking = false;
    }
  }

  /** What the lifecycle decision needs to know of one sandbox, gathered from the row, memory and the driver. */
  private factsOf(row: SandboxRow): LifecycleFacts {
    const l = this.live.get(row.id);
    const running = row.status === "ready" && !!l && !!this.driver?.isRunning(l.ref);
    return {
      status: row.status,
      statusChangedAt: Date.parse(row.status_changed_at),
      stoppedAt: row.stopped_at ? Date.parse(row.stopped_at) : null,
      idleTtlSeconds: row.idle_ttl_seconds,
      deleteAfterStopSeconds: row.delete_after_stop_seconds,
      held: this.busy.has(row.id),
      inflight: this.inflight.has(row.id),
      running,
      // Only a running sandbox is asked (the driver reads its processes).
      activeProcesses: running ? this.commands.activity(row.id) + this.driver!.busyProcesses(row.id) : 0,
      lastActivity: l?.lastActivity ?? null,
    };
  }

  /** The acting edge of the lifecycle loop: carries out what `nextAction` decided for one sandbox. */
  private async act(row: SandboxRow, action: LifecycleAction, now: number): Promise<void> {
    const provisionLate = `Provisioning did not finish within ${Math.round(this.settings.provisionDeadlineMs / 1000)} s`;
    switch (action) {
      case "fail-provision":
        await transition(this.db, row.id, ["provisioning"], "failed", { status_message: provisionLate });
        return;
      case "teardown-fail-provision":
        await this.teardown(row.id, this.runtimeOf(row), false).catch((e) => this.logFailure("teardown", row.id, e));
        await transition(this.db, row.id, ["provisioning"], "failed", { status_message: provisionLate });
        return;
      case "retry-delete":
        await this.delete(row).catch((err) =>
          this.ctx.log.error({ sandboxId: row.id, err }, "sandbox delete retry failed"),
        );
        return;
      case "fail-exited": {
        const oom = this.driver?.oomKills(row.id) ?? 0;
        await this.teardown(row.id, this.runtimeOf(row), false).catch((e) => this.logFailure("teardown", row.id, e));
        await transition(this.db, row.id, ["ready"], "failed", {
          runtime: null,
          stopped_at: nowIso(),
          status_message: `The sandbox's init process exited unexpectedly${oom ? " (out of memory)" : ""}; its files are kept, start it again`,
        });
        return;
      }
      case "touch": {
        const l = this.live.get(row.id);
        if (l) l.lastActivity = now;
        return;
      }
      case "idle-stop":
        this.ctx.log.info({ sandboxId: row.id }, "stopping idle sandbox");
        await this.stop(row, `Stopped after ${row.idle_ttl_seconds} s without activity`);
        return;
      case "expire":
        this.ctx.log.info({ sandboxId: row.id }, "deleting sandbox stopped past delete_after_stop_seconds");
        await this.delete(row);
        return;
      case "none":
        return;
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
