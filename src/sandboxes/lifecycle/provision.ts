import fs from "node:fs";
import path from "node:path";
import { attachEgress, egressCaptureSpec, type EgressAttachment } from "../../egress/index.ts";
import type { StoredProxyConfig } from "../../egress/index.ts";
import type { CapturedNetwork, RuntimeRef } from "../driver/driver.ts";
import { transition, type SandboxRow } from "../store/sandbox-store.ts";
import { runToCompletion } from "./exec.ts";
import type { SandboxManager } from "./manager.ts";

export async function provision(m: SandboxManager, row: SandboxRow, snapshotArchive: string | null): Promise<void> {
  let ref: RuntimeRef | null = null;
  let egress: EgressAttachment | null = null;
  try {
    // Replica mode: whoever provisions it runs it, so its data plane is forwarded here.
    if (m.ctx.cluster)
      await m.db
        .updateTable("sandboxes")
        .set({ owner_replica: m.ctx.cluster.replicaId })
        .where("id", "=", row.id)
        .execute();
    await m.prepare();
    const driver = m.requireDriver();
    const proxyConfig = row.proxy_config ? (JSON.parse(row.proxy_config) as StoredProxyConfig) : null;
    const image = await m.imageSnapshotOf(row);
    const lowerDir = image ? path.join(m.settings.stateDir, "oci-images", image, "bundle", "rootfs") : undefined;
    if (lowerDir && !fs.existsSync(lowerDir))
      throw new Error("the image this sandbox was made from is no longer on this host");
    const parked = await m.warm.take(row.id);
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
    const env = m.commandEnv(row, egress);
    m.live.set(row.id, { ref, egress, env, lastActivity: Date.now() });
    // Ready means an exec succeeds now. On the base image the driver's start already proved it
    // (bubblewrap's keeper runs inside every namespace, after the mounts and seccomp, which is all
    // an exec enters); an image may lack what an exec needs, so there an exec proves it. The
    // probe costs 15-60 ms of create → ready on a loaded host.
    if (lowerDir) {
      const probe = await runToCompletion(m, row.id, ["/bin/sh", "-c", ":"], 10);
      if (probe !== 0) throw new Error(`readiness probe exited with ${probe} (does the image have /bin/sh?)`);
    }
    const updated = await transition(m.db, row.id, ["provisioning"], "ready", {
      runtime: JSON.stringify(ref),
      stopped_at: null,
    });
    if (!updated) {
      // Deleted or failed (deadline) meanwhile: do not leave processes behind.
      await m.teardown(row.id, ref, false);
    }
  } catch (err) {
    const message = (err as Error).message;
    m.ctx.log.warn({ sandboxId: row.id, err }, "sandbox provisioning failed");
    await m.teardown(row.id, ref, false).catch((e) => m.logFailure("teardown after a failed provision", row.id, e));
    if (egress)
      await (egress as EgressAttachment)
        .detach()
        .catch((e) => m.logFailure("egress detach after a failed provision", row.id, e));
    await transition(m.db, row.id, ["provisioning"], "failed", {
      status_message: `Provisioning failed: ${message}`,
      runtime: null,
    });
  }
}
