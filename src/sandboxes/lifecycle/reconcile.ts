import fs from "node:fs";
import path from "node:path";
import { attachEgress, egressCaptureSpec, type EgressAttachment } from "../../egress/index.ts";
import type { StoredProxyConfig } from "../../egress/index.ts";
import { nowIso } from "../../store/database.ts";
import type { RuntimeRef } from "../driver/driver.ts";
import { ownersOfSandboxes, sandboxesInStatus, transition, type SandboxRow } from "../store/sandbox-store.ts";
import { leftBehind } from "./left-behind.ts";
import type { SandboxManager } from "./manager.ts";

/** Sandboxes are re-adopted concurrently (each is an egress attach and a few /proc reads). */
export async function reconcileAll(m: SandboxManager): Promise<void> {
  const rows = await sandboxesInStatus(
    m.db,
    m.ctx.cluster ? ["provisioning", "ready", "deleting", "error"] : ["provisioning", "ready", "deleting"],
    m.ctx.cluster?.replicaId,
  );
  if (rows.length) await m.prepare();
  const queue = [...rows];
  const worker = async () => {
    for (let row = queue.shift(); row; row = queue.shift()) await reconcileOne(m, row);
  };
  await Promise.all(Array.from({ length: Math.min(16, queue.length) }, worker));
  if (m.ctx.cluster) await removeLeftBehind(m, m.ctx.cluster.replicaId);
}

/**
 * Replicas: what this replica left of sandboxes deleted through another while it was dead (or
 * started afresh on another) is removed when it comes back: their processes, if any outlived
 * it, and their folders. The folders are listed before the rows are read, so a sandbox being
 * created meanwhile (its row comes first) is never taken for one left behind.
 */
async function removeLeftBehind(m: SandboxManager, me: string): Promise<void> {
  const boxes = path.join(m.settings.stateDir, "boxes");
  let ids: string[];
  try {
    // Warm sandboxes have no row yet: the warm pool's removeStale deals with those.
    ids = fs.readdirSync(boxes).filter((id) => !fs.existsSync(path.join(boxes, id, ".warm")));
  } catch {
    return; // no sandboxes here yet
  }
  for (const id of leftBehind(ids, await ownersOfSandboxes(m.db, ids), me)) {
    try {
      await m.driver?.destroy(id, null);
      fs.rmSync(m.commandOutputDir(id), { recursive: true, force: true });
      m.ctx.log.info(
        { sandboxId: id },
        "removed a sandbox left behind while this replica was away (deleted or started on another replica)",
      );
    } catch (err) {
      m.logFailure("removal of a sandbox left behind", id, err);
    }
  }
}

async function reconcileOne(m: SandboxManager, row: SandboxRow): Promise<void> {
  {
    try {
      const ref = row.runtime ? (JSON.parse(row.runtime) as RuntimeRef) : null;
      if (row.status === "deleting") {
        await m.delete(row);
      } else if (row.status === "error") {
        // Reported lost while this replica was away: end what is left of it, keep its files.
        if (ref && m.driver)
          await m.driver.stop(row.id, ref).catch((e) => m.logFailure("stop of a sandbox reported lost", row.id, e));
        await transition(m.db, row.id, ["error"], "stopped", {
          runtime: null,
          stopped_at: nowIso(),
          status_message:
            "Its replica came back after the sandbox was reported lost; its files are kept, start it again",
        });
      } else if (row.status === "provisioning") {
        if (ref && m.driver)
          await m.driver.stop(row.id, ref).catch((e) => m.logFailure("stop of a half-provisioned sandbox", row.id, e));
        await transition(m.db, row.id, ["provisioning"], "failed", {
          status_message: "The platform restarted while the sandbox was provisioning",
          runtime: null,
        });
      } else if (ref && m.driver && !m.prepareError && m.driver.isRunning(ref)) {
        const proxyConfig = row.proxy_config ? (JSON.parse(row.proxy_config) as StoredProxyConfig) : null;
        let egress: EgressAttachment;
        try {
          // The listeners are opened by a small helper in the sandbox's namespace (no Node start-up per box).
          const spec = await egressCaptureSpec();
          const captured = spec && m.driver.captureNetwork ? await m.driver.captureNetwork(ref, spec) : null;
          egress = await attachEgress({
            sandboxId: row.id,
            workspaceId: row.workspace_id,
            netnsPid: m.driver.netnsPid(ref),
            proxyConfig,
            captured,
          });
        } catch (err) {
          // Never leave a sandbox running without its egress: stop it, say why, keep its files.
          await m.driver.stop(row.id, ref).catch((e) => m.logFailure("stop without egress", row.id, e));
          await transition(m.db, row.id, ["ready"], "stopped", {
            runtime: null,
            stopped_at: nowIso(),
            status_message: `Stopped at platform start: the egress proxy could not be re-attached (${(err as Error).message}); start it again`,
          });
          return;
        }
        const env = m.commandEnv(row, egress);
        m.live.set(row.id, { ref, egress, env, lastActivity: Date.now() });
        // Their output had nowhere to go: end them; a reconnecting client is told why.
        const ended = m.driver.endOrphanedCommands?.(row.id, ref) ?? 0;
        m.ctx.log.info({ sandboxId: row.id, commandsEnded: ended }, "sandbox re-adopted after restart");
      } else {
        if (m.driver)
          await m.driver
            .stop(row.id, ref)
            .catch((e) => m.logFailure("cleanup of a sandbox whose processes are gone", row.id, e));
        await transition(m.db, row.id, ["ready"], "stopped", {
          runtime: null,
          stopped_at: nowIso(),
          status_message:
            "The sandbox's processes were gone when the platform started (host reboot or crash); its files are kept",
        });
      }
    } catch (err) {
      m.ctx.log.error({ sandboxId: row.id, err }, "sandbox reconcile failed");
    }
  }
}
