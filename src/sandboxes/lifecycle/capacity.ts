import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { sql, type Kysely } from "kysely";
import { HttpError, invalidAt } from "../../http/errors.ts";
import { advisoryKey } from "../../store/advisory-lock.ts";
import type { Dialect } from "../../store/database.ts";
import type { Database } from "../../store/schema.ts";
import {
  admit,
  type AdmissionLimits,
  type AdmissionRequest,
  type Commitments,
  type HostCapacity,
} from "./admission.ts";

/** One admission at a time across the processes of a PostgreSQL store. */
const ADMISSION_LOCK = advisoryKey("sandbox-admission");

const NOTHING_COMMITTED: Commitments = {
  host: { runningMemBytes: 0, diskUnwrittenBytes: 0 },
  workspace: { sandboxes: 0, runningMemBytes: 0, diskBytes: 0 },
};
const UNLIMITED: AdmissionLimits = {
  memoryOvercommit: 100,
  diskOvercommit: 100,
  workspaceMaxSandboxes: Infinity,
  workspaceMaxMemBytes: Infinity,
  workspaceMaxDiskBytes: Infinity,
};

/**
 * The I/O side of admission: the host's figures (its memory, the free space where sandbox disks
 * live, what each disk image already holds) and the sandboxes' commitments from the database, and
 * one admission at a time so two concurrent creates cannot both take the last room: in this process
 * by a queue, and across the processes sharing a PostgreSQL database by an advisory lock held
 * while the decision and its commit run (the commitments are the database's rows, so each process
 * sees what the others admitted). Every row counts as this host's: processes on several hosts
 * sharing one database admit as if all their sandboxes ran on each (conservative).
 */
export class Admissions {
  private queue: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly db: Kysely<Database>,
    private readonly stateDir: string,
    private readonly limits: AdmissionLimits,
    private readonly dialect: Dialect = "sqlite",
  ) {}

  /**
   * Runs `commit` (which writes the sandbox's new state) only if the request is admitted, with no
   * other admission in between; else throws the refusal as the API answers it.
   */
  admitThen<T>(workspaceId: string, req: AdmissionRequest, commit: () => Promise<T>): Promise<T> {
    const turn = this.queue.then(() =>
      this.acrossProcesses(async () => {
        const refusal = admit(req, this.host(), await this.commitments(workspaceId), this.limits);
        if (refusal?.status === 422) throw invalidAt(["body", refusal.field], refusal.message);
        if (refusal?.status === 429) throw new HttpError(429, { error: "QuotaExceeded", message: refusal.message });
        if (refusal?.status === 503) throw new HttpError(503, { error: "Unschedulable", message: refusal.message });
        return commit();
      }),
    );
    // The next admission waits for this one, whatever its outcome.
    this.queue = turn.catch(() => undefined);
    return turn;
  }

  /**
   * On PostgreSQL, `fn` under a session advisory lock named after this Wharf schema (several Wharf
   * schemas may share a database), on a connection of its own. The commit's writes go through
   * other connections and are done before the lock goes. A process waits for the lock with one
   * connection at most (its own admissions queue before it). SQLite: one process per file.
   */
  private async acrossProcesses<T>(fn: () => Promise<T>): Promise<T> {
    if (this.dialect !== "postgres") return fn();
    return this.db.connection().execute(async (conn) => {
      await sql`select pg_advisory_lock(${ADMISSION_LOCK})`.execute(conn);
      try {
        return await fn();
      } finally {
        await sql`select pg_advisory_unlock(${ADMISSION_LOCK})`.execute(conn);
      }
    });
  }

  /** A PATCH of mem_bytes: never more than the host's memory (it applies at the next start). */
  checkResize(memBytes: number | undefined): void {
    if (memBytes === undefined) return;
    const refusal = admit({ memBytes, fsCapacityBytes: 0, creates: false }, this.host(), NOTHING_COMMITTED, UNLIMITED);
    if (refusal?.status === 422) throw invalidAt(["body", refusal.field], refusal.message);
  }

  private host(): HostCapacity {
    fs.mkdirSync(this.stateDir, { recursive: true, mode: 0o700 });
    const st = fs.statfsSync(this.stateDir);
    return { memoryBytes: os.totalmem(), diskFreeBytes: Number(st.bavail) * Number(st.bsize) };
  }

  /** Bytes a sandbox's disk image already takes on the host (sparse: what was written); 0 without one. */
  private written(id: string): number {
    try {
      return fs.statSync(path.join(this.stateDir, "boxes", id, "disk.img")).blocks * 512;
    } catch {
      return 0; // no image (directory mode, or not made yet): count its whole capacity as still to come
    }
  }

  private async commitments(workspaceId: string): Promise<Commitments> {
    const rows = await this.db
      .selectFrom("sandboxes")
      .select(["id", "workspace_id", "status", "mem_bytes", "fs_capacity_bytes"])
      .where("status", "!=", "deleting")
      .execute();
    const c: Commitments = {
      host: { runningMemBytes: 0, diskUnwrittenBytes: 0 },
      workspace: { sandboxes: 0, runningMemBytes: 0, diskBytes: 0 },
    };
    for (const r of rows) {
      const mem = Number(r.mem_bytes);
      const disk = Number(r.fs_capacity_bytes);
      const running = r.status === "provisioning" || r.status === "ready";
      if (running) c.host.runningMemBytes += mem;
      c.host.diskUnwrittenBytes += Math.max(0, disk - this.written(r.id));
      if (r.workspace_id !== workspaceId) continue;
      c.workspace.sandboxes++;
      if (running) c.workspace.runningMemBytes += mem;
      c.workspace.diskBytes += disk;
    }
    return c;
  }
}
