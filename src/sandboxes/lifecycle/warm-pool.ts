import fs from "node:fs";
import path from "node:path";
import { egressCaptureSpec } from "../../egress/index.ts";
import type { Logger } from "../../log/logger.ts";
import { newId } from "../../store/ids.ts";
import type { SandboxDriver } from "../driver/driver.ts";
import { DEFAULTS } from "../api/schemas.ts";
import type { SandboxSettings } from "../settings.ts";

/** What a create asks for; only a default sandbox without a snapshot can be served warm. */
export interface WarmWant {
  cpuMillicores: number;
  memBytes: number;
  fsCapacityBytes: number;
  snapshot: boolean;
}

/**
 * Sandboxes begun with default resources (namespaces, mounts, no egress yet), waiting for a create
 * to claim them: a claimed one only needs its egress attached and its init run. Marked on disk by a
 * `.warm` file, so what a crashed process left of its pool is removed at the next start.
 */
export class WarmPool {
  private pool: Array<{ id: string; parked: Promise<unknown | null> }> = [];
  private claimed = new Map<string, Promise<unknown | null>>();
  private refilling = false;
  private stopping = false;

  constructor(
    private readonly driver: SandboxDriver | null,
    private readonly settings: SandboxSettings,
    private readonly log: Logger,
    /** The driver is prepared and usable (host checks, base image): false leaves the pool empty. */
    private readonly usable: () => Promise<boolean>,
  ) {}

  /**
   * Takes a warm sandbox for a create with default resources and no snapshot: its id becomes the
   * new row's id, and provisioning only attaches the egress and runs it. Null when the pool is
   * empty or the request needs something else.
   */
  claim(want: WarmWant): string | null {
    if (
      want.snapshot ||
      want.cpuMillicores !== DEFAULTS.vcpus * 1000 ||
      want.memBytes !== DEFAULTS.memBytes ||
      want.fsCapacityBytes !== DEFAULTS.fsCapacityBytes
    )
      return null;
    const entry = this.pool.shift();
    if (!entry) return null;
    this.claimed.set(entry.id, entry.parked);
    // The refill starts once this sandbox is up (see the manager's `launch`): it would compete with it for the CPU.
    return entry.id;
  }

  /**
   * The parked state of a claimed sandbox, for provisioning to finish it (null: not claimed, or its
   * preparation failed). It stops being the pool's: the `.warm` mark goes.
   */
  async take(id: string): Promise<unknown | null> {
    const warm = this.claimed.get(id);
    if (!warm) return null;
    this.claimed.delete(id);
    const parked = await warm;
    fs.rmSync(path.join(this.settings.stateDir, "boxes", id, ".warm"), { force: true });
    return parked;
  }

  /** Warm sandboxes ready to be claimed (benchmarks wait for a full pool). */
  async ready(): Promise<number> {
    const states = await Promise.all(this.pool.map((e) => e.parked));
    return states.filter(Boolean).length;
  }

  /** Gives back a claimed warm sandbox whose create did not go through. */
  async release(id: string): Promise<void> {
    const warm = this.claimed.get(id);
    if (!warm) return;
    this.claimed.delete(id);
    const parked = await warm;
    if (parked && this.driver?.abandon) await this.driver.abandon(parked);
    await this.driver?.destroy(id, null).catch((err) => this.log.warn({ id, err }, "warm sandbox not removed"));
    void this.refill();
  }

  /** Keeps the pool at its size, one sandbox at a time (off the request path). */
  async refill(): Promise<void> {
    const driver = this.driver;
    if (this.refilling || this.stopping || !driver?.begin || this.settings.warmPool <= 0) return;
    this.refilling = true;
    try {
      if (!(await this.usable())) return;
      const capture = await egressCaptureSpec();
      while (!this.stopping && this.pool.length < this.settings.warmPool) {
        const id = newId();
        const dir = path.join(this.settings.stateDir, "boxes", id);
        fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
        // Marks the folder as the pool's: a crash leaves it behind, the next start removes it.
        fs.writeFileSync(path.join(dir, ".warm"), "");
        const parked = driver
          .begin({
            id,
            workspaceId: "",
            cpuMillicores: DEFAULTS.vcpus * 1000,
            memBytes: DEFAULTS.memBytes,
            fsCapacityBytes: DEFAULTS.fsCapacityBytes,
            snapshotArchive: null,
            capture,
          })
          .catch((err) => {
            this.log.warn({ err }, "warm sandbox could not be prepared");
            return null;
          });
        this.pool.push({ id, parked });
        if (!(await parked)) {
          this.pool = this.pool.filter((e) => e.id !== id);
          await driver.destroy(id, null).catch((err) => this.log.warn({ id, err }, "failed warm sandbox not removed"));
          return; // something is wrong with the host: do not spin; the next claim tries again
        }
      }
    } finally {
      this.refilling = false;
    }
  }

  /** Removes the pool's sandboxes and refills no more (shutdown). */
  async drain(): Promise<void> {
    this.stopping = true;
    const driver = this.driver;
    const entries = this.pool.splice(0);
    for (const e of entries) {
      const parked = await e.parked;
      if (parked && driver?.abandon) await driver.abandon(parked);
      await driver?.destroy(e.id, null).catch((err) => this.log.warn({ id: e.id, err }, "warm sandbox not removed"));
    }
  }

  /** Removes what a crashed process left of its pool (start). */
  removeStale(): void {
    const boxes = path.join(this.settings.stateDir, "boxes");
    let names: string[] = [];
    try {
      names = fs.readdirSync(boxes);
    } catch {
      return; // no sandboxes yet
    }
    for (const id of names) {
      if (!fs.existsSync(path.join(boxes, id, ".warm"))) continue;
      void this.driver?.destroy(id, null).catch((err) => this.log.warn({ id, err }, "stale warm sandbox not removed"));
    }
  }
}
