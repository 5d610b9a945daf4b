import { nowIso } from "../../store/database.ts";
import { markLostSandboxes, sandboxesInStatus, transition, type SandboxRow } from "../store/sandbox-store.ts";
import { nextAction, type LifecycleAction, type LifecycleFacts } from "./lifecycle-decision.ts";
import type { SandboxManager } from "./manager.ts";

/** One pass of the lifecycle loop over this replica's sandboxes (the manager keeps one pass at a time). */
export async function lifecycleTick(m: SandboxManager): Promise<void> {
  try {
    m.commands.purge();
    const now = Date.now();
    // A snapshot is written inside its request; one still `building` long after was cut short (restart).
    const stale = new Date(now - m.settings.provisionDeadlineMs).toISOString();
    // Image pulls run for as long as they need while this process lives; a restart ends them.
    const pulling = m.jobs.size > 0;
    await m.db
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
    if (m.ctx.cluster) {
      const lost = await markLostSandboxes(m.db, await m.ctx.cluster.deadReplicas());
      if (lost) m.ctx.log.warn({ sandboxes: lost }, "sandboxes of a dead replica reported as error");
    }
    // Replica mode: each replica looks after the sandboxes it runs, and only those.
    const rows = await sandboxesInStatus(
      m.db,
      ["provisioning", "ready", "stopped", "deleting"],
      m.ctx.cluster?.replicaId,
    );
    const times = {
      provisionDeadlineMs: m.settings.provisionDeadlineMs,
      deleteDeadlineMs: m.settings.deleteDeadlineMs,
      ttlSecondMs: m.settings.ttlSecondMs,
    };
    for (const row of rows) await act(m, row, nextAction(factsOf(m, row), now, times), now);
  } catch (err) {
    m.ctx.log.error({ err }, "sandbox lifecycle tick failed");
  }
}

/** What the lifecycle decision needs to know of one sandbox, gathered from the row, memory and the driver. */
function factsOf(m: SandboxManager, row: SandboxRow): LifecycleFacts {
  const l = m.live.get(row.id);
  const running = row.status === "ready" && !!l && !!m.driver?.isRunning(l.ref);
  return {
    status: row.status,
    statusChangedAt: Date.parse(row.status_changed_at),
    stoppedAt: row.stopped_at ? Date.parse(row.stopped_at) : null,
    idleTtlSeconds: row.idle_ttl_seconds,
    deleteAfterStopSeconds: row.delete_after_stop_seconds,
    held: m.busy.has(row.id),
    inflight: m.inflight.has(row.id),
    running,
    // Only a running sandbox is asked (the driver reads its processes).
    activeProcesses: running ? m.commands.activity(row.id) + m.driver!.busyProcesses(row.id) : 0,
    lastActivity: l?.lastActivity ?? null,
  };
}

/** The acting edge of the lifecycle loop: carries out what `nextAction` decided for one sandbox. */
async function act(m: SandboxManager, row: SandboxRow, action: LifecycleAction, now: number): Promise<void> {
  const provisionLate = `Provisioning did not finish within ${Math.round(m.settings.provisionDeadlineMs / 1000)} s`;
  switch (action) {
    case "fail-provision":
      await transition(m.db, row.id, ["provisioning"], "failed", { status_message: provisionLate });
      return;
    case "teardown-fail-provision":
      await m.teardown(row.id, m.runtimeOf(row), false).catch((e) => m.logFailure("teardown", row.id, e));
      await transition(m.db, row.id, ["provisioning"], "failed", { status_message: provisionLate });
      return;
    case "retry-delete":
      await m.delete(row).catch((err) => m.ctx.log.error({ sandboxId: row.id, err }, "sandbox delete retry failed"));
      return;
    case "fail-exited": {
      const oom = m.driver?.oomKills(row.id) ?? 0;
      await m.teardown(row.id, m.runtimeOf(row), false).catch((e) => m.logFailure("teardown", row.id, e));
      await transition(m.db, row.id, ["ready"], "failed", {
        runtime: null,
        stopped_at: nowIso(),
        status_message: `The sandbox's init process exited unexpectedly${oom ? " (out of memory)" : ""}; its files are kept, start it again`,
      });
      return;
    }
    case "touch": {
      const l = m.live.get(row.id);
      if (l) l.lastActivity = now;
      return;
    }
    case "idle-stop":
      m.ctx.log.info({ sandboxId: row.id }, "stopping idle sandbox");
      await m.stop(row, `Stopped after ${row.idle_ttl_seconds} s without activity`);
      return;
    case "expire":
      m.ctx.log.info({ sandboxId: row.id }, "deleting sandbox stopped past delete_after_stop_seconds");
      await m.delete(row);
      return;
    case "none":
      return;
  }
}
