import { readSetting } from "../config/index.ts";
import { RunEventBus } from "../cluster/index.ts";
import type { AgentServerContext } from "./context.ts";
import { CronScheduler } from "./crons/cron-scheduler.ts";
import type { AgentProject } from "./project/project.ts";
import { RunEngine } from "./runs/run-engine.ts";
import { installPooledRandom } from "./runs/pooled-random.ts";
import { egressWebhookGate, type WebhookGate } from "./runs/webhook.ts";
import type { AgentServerOptions } from "./server.ts";
import { TtlSweeper } from "./storage/ttl-sweeper.ts";

export interface StartedRuns {
  engine: RunEngine;
  bus: RunEventBus | null;
  crons: CronScheduler;
  sweeper: TtlSweeper;
}

export interface RunSettings {
  leaseMs: number;
  tickMs: number;
  /** Releases what the server opened before the runs (on a failed start). */
  release: () => Promise<void>;
}

/** Opens the run event bus, starts the run engine, then the cron scheduler and the TTL sweeps. */
export async function startRuns(
  ctx: AgentServerContext,
  project: AgentProject,
  options: AgentServerOptions,
  settings: RunSettings,
): Promise<StartedRuns> {
  const { leaseMs, tickMs, release } = settings;
  const webhookGate = options.webhookGate === undefined ? defaultWebhookGate() : options.webhookGate;
  const bus = await openBus(ctx, options, release);
  // The graphs' libraries draw random UUIDs many times per run: served from a pool (see there).
  installPooledRandom();
  const engine = new RunEngine(ctx, {
    leaseMs,
    apiUrl: options.apiUrl,
    databaseUrl: options.databaseUrl,
    signalSecret: options.signalSecret,
    webhookGate,
    bus,
    slots: options.runSlots ?? readSetting("WHARF_RUN_SLOTS"),
  });
  try {
    await engine.listen();
  } catch (err) {
    await bus?.close();
    await release();
    throw err;
  }
  if (options.exclusive) {
    const n = await engine.recoverAbandoned();
    if (n)
      options.log.warn(
        { runs: n },
        "runs abandoned by a previous process were settled at start (resumed or ended as error)",
      );
  }
  engine.start();
  const crons = new CronScheduler(ctx, engine, tickMs);
  crons.start();
  const sweeper = new TtlSweeper(ctx, {
    storeMinutes: project.store.ttl?.sweepMinutes ?? null,
    threads: project.checkpointerTtl
      ? {
          strategy: project.checkpointerTtl.strategy,
          ttlMinutes: project.checkpointerTtl.defaultTtlMinutes,
          sweepMinutes: project.checkpointerTtl.sweepMinutes,
        }
      : null,
  });
  sweeper.start();
  return { engine, bus, crons, sweeper };
}

/** Replicas (PostgreSQL + REDIS_URL): run events through Redis Streams, any replica serves any stream. */
async function openBus(
  ctx: AgentServerContext,
  options: AgentServerOptions,
  release: () => Promise<void>,
): Promise<RunEventBus | null> {
  const redisUrl = readSetting("REDIS_URL");
  let bus: RunEventBus | null = null;
  try {
    if (redisUrl && ctx.dialect !== "postgres")
      throw new Error(
        "REDIS_URL needs DATABASE_URL to be PostgreSQL (replicas share runs through it); with SQLite Wharf runs as one process without Redis",
      );
    if (redisUrl) bus = await RunEventBus.open(redisUrl, options.log);
  } catch (err) {
    await release();
    throw new Error(`cannot open redis for run events: ${(err as Error).message}`, { cause: err });
  }
  return bus;
}

/**
 * Webhooks of a server whose connections go through the egress proxy (`WHARF_AGENT_EGRESS_PROXIED`,
 * set by the platform for a confined deployment) are left to the proxy; anywhere else they are
 * checked here against the same egress address policy and the operator's settings.
 */
export function defaultWebhookGate(): WebhookGate {
  if (readSetting("WHARF_AGENT_EGRESS_PROXIED")) return null;
  return egressWebhookGate({
    WHARF_EGRESS_HOSTS: readSetting("WHARF_EGRESS_HOSTS"),
    WHARF_EGRESS_ALLOW_INTERNAL: readSetting("WHARF_EGRESS_ALLOW_INTERNAL"),
    WHARF_EGRESS_SYSTEM_DNS: readSetting("WHARF_EGRESS_SYSTEM_DNS"),
  });
}
