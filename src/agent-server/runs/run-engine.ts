import type { AgentServerContext } from "../context.ts";
import type { AuthContext } from "../auth/custom-auth.ts";
import type { Assistant } from "../storage/assistants.ts";
import { parseJson } from "../storage/json-columns.ts";
import type { AgentRunsTable } from "../storage/tables.ts";
import type { RunEventBus } from "../../cluster/index.ts";
import { RunControl } from "@langchain/langgraph";
import { newWorkerId } from "./worker-identity.ts";
import { RunHousekeeper } from "./run-housekeeping.ts";
import { RunChannel, type RunEvent } from "./run-channel.ts";
import { NO_RUN_SIGNALS, openRunSignals, signalChannel, type RunSignals } from "./run-signals.ts";
import type { RunOutcome } from "./run-executor.ts";
import { toRun, type Run, type RunKwargs, type RunPrivate } from "./runs.ts";
import { endedRunPayload, sendWebhook, type WebhookGate } from "./webhook.ts";
import { ThreadWatchers } from "./thread-watchers.ts";
import type { ActiveRun, CancelAction, RequestHeaderPairs, RunCreate, RunEnded } from "./run-types.ts";
import { runEnded, runSeconds } from "./run-events.ts";
import { DbClock } from "./db-clock.ts";
import { RunStreams } from "./run-streams.ts";
import { EndedRuns, ENDED_KEEP_MS, RESUMABLE_KEEP_MS } from "./ended-runs.ts";
import { fencedSaver } from "./fenced-saver.ts";
import { openRunPrivate, sealRunPrivate } from "./run-private.ts";
import { RunQueue } from "./run-queue.ts";
import { RunFollowers } from "./run-followers.ts";
import { admitRun, type AdmissionHost } from "./run-admission.ts";
import { runAttempt, type AttemptHost } from "./run-attempt.ts";
import { HousekeepingPasses } from "./run-passes.ts";
import { PendingWrites } from "./pending-writes.ts";

export type { ActiveRun, CancelAction, RunCreate, RunEnded } from "./run-types.ts";

export { noAssistant, privateConfigurable } from "./run-types.ts";

/**
 * Creates, queues, executes and cancels runs. Runs execute in this process as soon as they may
 * (no worker polling); the database row is the durable record: a conditional update claims a
 * pending run, a per-thread lock (PostgreSQL `FOR UPDATE`) serialises the multitask decision, and
 * a lease (renewed by one timer for all runs) lets any process end runs whose process died.
 */
export class RunEngine {
  readonly workerId = newWorkerId();
  private readonly active = new Map<string, ActiveRun>();
  private readonly privates = new Map<string, RunPrivate>();
  /** Followers of whole threads (`GET /threads/{id}/stream`), told of each run that starts here. */
  private readonly threadWatchers = new ThreadWatchers();
  private timer: NodeJS.Timeout | null = null;
  private stopping = false;
  /** Aborted when the engine stops: long-lived followers (thread streams) end with it. */
  private readonly stopped = new AbortController();
  get stopSignal(): AbortSignal {
    return this.stopped.signal;
  }
  private signals: RunSignals = NO_RUN_SIGNALS;
  /** Told of each run that ends in this process (metrics). */
  private readonly endListeners = new Set<(ended: RunEnded) => void>();

  /** Told of each run that starts executing in this process (the event-based protocol's pumps on replicas). */
  private readonly startListeners = new Set<(active: ActiveRun, kwargs: RunKwargs) => void>();

  /** Calls `fn` with each run that starts executing in this process from now on; returns the unsubscribe. */
  onRunStarted(fn: (active: ActiveRun, kwargs: RunKwargs) => void): () => void {
    this.startListeners.add(fn);
    return () => this.startListeners.delete(fn);
  }

  /** Calls `fn` with each run that ends in this process from now on; returns the unsubscribe. */
  onRunEnded(fn: (ended: RunEnded) => void): () => void {
    this.endListeners.add(fn);
    return () => this.endListeners.delete(fn);
  }

  constructor(
    private readonly ctx: AgentServerContext,
    private readonly options: {
      leaseMs: number;
      apiUrl?: () => string;
      databaseUrl?: string | null;
      signalSecret?: string;
      webhookGate: WebhookGate;
      /** Redis Streams for run events (replicas); null: one process serving its own memory. */
      bus?: RunEventBus | null;
      /** Runs executing here at once (`WHARF_RUN_SLOTS`); 0: API only. */
      slots?: number;
    },
  ) {
    this.streams = new RunStreams(options.bus ?? null, ctx.log);
    this.slots = options.slots ?? Number.MAX_SAFE_INTEGER;
    this.clock = new DbClock(ctx.dialect === "postgres" ? ctx.db : null);
    this.queue = new RunQueue(ctx, this.workerId, () => this.leaseUntil());
    this.followers = new RunFollowers({
      ctx,
      streams: this.streams,
      stopSignal: this.stopSignal,
      isStopping: () => this.stopping,
      active: (runId) => this.active.get(runId),
      isActive: (runId) => this.active.has(runId),
      endedChannel: (runId) => this.endedChannel(runId),
    });
    this.housekeeper = new RunHousekeeper({
      ctx: this.ctx,
      workerId: this.workerId,
      activeCount: () => this.active.size,
      freeSlots: () => Math.max(0, this.slots - this.active.size),
      renewEveryMs: Math.floor(this.options.leaseMs / 3),
      clock: this.clock,
      leasesRenewed: (sentAt) => {
        for (const id of this.active.keys()) this.leaseHeld.set(id, sentAt + this.options.leaseMs);
      },
      isStopping: () => this.stopping,
      leaseUntil: () => this.leaseUntil(),
      lockThread: (trx, threadId) => this.queue.lockThread(trx, threadId),
      claimNext: (trx, threadId) => this.queue.claimNext(trx, threadId),
      claimOnThread: (threadId) => this.queue.claimDelayed(threadId, () => true),
      startClaimed: (row) => this.startClaimed(row),
    });
    this.passes = new HousekeepingPasses(
      {
        full: () => this.housekeeping(),
        fill: () => this.housekeeper.startQueued(),
        startOnThread: (threadId) => this.housekeeper.startOnThread(threadId),
        hasSlot: () => this.hasSlot(),
      },
      ctx.log,
      () => this.stopping,
    );
    this.attemptHost = {
      ctx,
      controls: this.controls,
      apiUrl: options.apiUrl,
      fencedSaver: (saver, runId, onLost) => this.fencedSaver(saver, runId, onLost),
    };
    this.admission = this.admissionHost();
  }

  /** What executing a run's graph needs of the engine. */
  private readonly attemptHost: AttemptHost;
  private readonly admission: AdmissionHost;
  private readonly passes: HousekeepingPasses;

  private readonly housekeeper: RunHousekeeper;
  private readonly queue: RunQueue;
  private readonly followers: RunFollowers;
  /** The replica side: runs mirrored to and followed from Redis. */
  readonly streams: RunStreams;
  private readonly slots: number;
  private readonly clock: DbClock;
  /**
   * Until when (monotonic clock) each run's lease is surely ours: from its claim or the last renewal
   * sent. A replica frozen past it (SIGSTOP, a long pause, a partition) writes no checkpoint: another
   * replica may have taken the run over meanwhile.
   */
  private readonly leaseHeld = new Map<string, number>();

  /**
   * The checkpointer as a run on a replica writes through it: refused once the run's lease may be
   * lost, and (PostgreSQL) each write's transaction takes the run's row, still this worker's, first
   * (checkpoint-fence.ts): a write that finds the run taken over stops the run as fenced.
   */
  private fencedSaver<S extends object>(saver: S, runId: string, onLost: () => void): S {
    if (!this.streams.enabled) return saver;
    return fencedSaver(
      saver,
      () => (this.leaseHeld.get(runId) ?? 0) > performance.now(),
      { runId, workerId: this.workerId },
      onLost,
    );
  }

  /** Drain controls of the runs executing here (SIGTERM stops them at a superstep): LangGraph's, or a Python run's. */
  private readonly controls = new Map<string, Pick<RunControl, "requestDrain">>();

  private hasSlot(): boolean {
    return this.active.size < this.slots;
  }

  /** Writes the answer to a run did not wait for: the engine stops after them. */
  private readonly lateWrites = new PendingWrites();

  /** Ended runs' channels, kept a while so their events can be replayed (`Last-Event-ID`). */
  private readonly ended = new EndedRuns();

  /** An ended run's channel (its full event stream), if still kept. */
  endedChannel(runId: string): ActiveRun | undefined {
    return this.ended.get(runId);
  }

  get(runId: string): ActiveRun | undefined {
    return this.active.get(runId);
  }

  /** The thread run executing in this process, if any. */
  activeOnThread(threadId: string): ActiveRun | undefined {
    for (const a of this.active.values()) if (a.run.thread_id === threadId && !a.run.kwargs.temporary) return a;
    return undefined;
  }

  /** The thread's run executing now: here, or (replicas) on any replica. */
  async runningOnThread(threadId: string): Promise<string | undefined> {
    const local = this.activeOnThread(threadId);
    if (local || !this.streams.enabled) return local?.run.run_id;
    return this.queue.runningOnThread(threadId);
  }

  /** Calls `fn` for every run of the thread that starts in this process from now on; returns the unsubscribe. */
  watchThread(threadId: string, fn: (a: ActiveRun) => void): () => void {
    return this.threadWatchers.watch(threadId, fn);
  }

  /** The end of a lease taken now, on the database's clock. */
  private leaseUntil(): string {
    return this.clock.iso(this.options.leaseMs);
  }

  /** Validates and records a run; starts it at once when its thread is free. */
  create(
    threadId: string | null,
    body: RunCreate,
    auth: AuthContext | null,
    headers: RequestHeaderPairs | null,
    opts: { protocol?: boolean } = {},
  ): Promise<{ run: Run; active: ActiveRun | null }> {
    return admitRun(this.admission, threadId, body, auth, headers, opts);
  }

  /** What admitting a new run needs of the engine. */
  private admissionHost(): AdmissionHost {
    return {
      ctx: this.ctx,
      queue: this.queue,
      workerId: this.workerId,
      leaseUntil: () => this.leaseUntil(),
      seal: (runId, priv) => this.seal(runId, priv),
      hasSlot: () => this.hasSlot(),
      keepPrivate: (runId, priv) => this.privates.set(runId, priv),
      startLater: (threadId, delayMs) => this.startLater(threadId, delayMs),
      queuedForSlot: (threadId, start) => this.passes.queuedForSlot(threadId, start),
      wakeOthers: () => this.wakeOthers(),
      launch: (run, kwargs, priv, assistant) => this.launch(run, kwargs, priv, assistant),
      cancel: (threadId, runIds, action) => this.cancel(threadId, runIds, action),
    };
  }

  /**
   * The executing run, waiting while it is queued. Resolves null when the run is over (or was
   * cancelled before it started).
   */
  whenStarted(runId: string, signal?: AbortSignal): Promise<ActiveRun | null> {
    return this.followers.whenStarted(runId, signal);
  }

  /** Resolves when a run has ended (here or, on replicas, in another process). */
  waitForEnd(runId: string): Promise<ActiveRun | null> {
    return this.followers.waitForEnd(runId);
  }

  /** A run's events after `after` (-1: all), until it ends or `signal` aborts; null when there is nothing to follow. */
  follow(runId: string, after: number, signal: AbortSignal, replay: boolean): Promise<AsyncGenerator<RunEvent> | null> {
    return this.followers.follow(runId, after, signal, replay);
  }

  private seal(runId: string, priv: RunPrivate) {
    return sealRunPrivate(this.ctx, runId, priv);
  }

  private unseal(runId: string, kwargs: RunKwargs): RunPrivate {
    return openRunPrivate(this.ctx, runId, kwargs, this.privates.get(runId));
  }

  /** Starts executing a run this process has claimed. */
  private launch(run: Run, kwargs: RunKwargs, priv: RunPrivate, assistant: Assistant | null): ActiveRun {
    const active: ActiveRun = {
      run,
      channel: new RunChannel(),
      abort: new AbortController(),
      done: null as unknown as Promise<RunOutcome>,
    };
    this.active.set(run.run_id, active);
    // Claimed just now with a full lease (a little less: the claim was written a moment ago).
    this.leaseHeld.set(run.run_id, performance.now() + this.options.leaseMs - 250);
    this.privates.delete(run.run_id);
    active.done = this.execute(active, kwargs, priv, assistant);
    this.followers.notifyStart(run.run_id, active);
    for (const fn of this.startListeners) fn(active, kwargs);
    if (!kwargs.temporary) {
      this.threadWatchers.started(run.thread_id, active);
      this.streams.threadRunStarted(run.thread_id, run.run_id);
    }
    return active;
  }

  private async execute(
    active: ActiveRun,
    kwargs: RunKwargs,
    priv: RunPrivate,
    knownAssistant: Assistant | null,
  ): Promise<RunOutcome> {
    const { run, channel, abort } = active;
    const ctx = this.ctx;
    const stateful = !kwargs.temporary;
    const startedAt = new Date();
    // A replica that lost the run's lease (a later attempt owns its stream) stops executing it.
    await this.streams.attach(active, kwargs.attempt ?? 1, () => {
      if (!abort.signal.aborted) abort.abort("fenced");
    });
    const control = new RunControl();
    this.controls.set(run.run_id, control);
    channel.push("metadata", { run_id: run.run_id, attempt: kwargs.attempt ?? 1 });
    const { outcome, rollbackTo, python } = await runAttempt(
      this.attemptHost,
      active,
      kwargs,
      priv,
      knownAssistant,
      control,
    );
    if (outcome.error) ctx.log.info({ runId: run.run_id, error: outcome.error.message }, "run ended with an error");
    const rollback = abort.signal.aborted && abort.signal.reason === "rollback";
    if (rollback && python && stateful) {
      // The run's own checkpoints go; the JS saver below has none of this thread's.
      await python
        .deleteRunCheckpoints(run.thread_id, run.run_id)
        .catch((err) => ctx.log.error({ err, runId: run.run_id }, "cannot roll back a Python run's checkpoints"));
    }
    this.controls.delete(run.run_id);
    this.leaseHeld.delete(run.run_id);
    const handBack = !!outcome.drained && stateful;
    const recorded = this.recordOutcome(run, kwargs, outcome, handBack, rollback ? (rollbackTo ?? null) : undefined);
    // A stateless run's row only marks it executing (if this process dies, housekeeping removes it):
    // its caller is answered without waiting for the row's removal, one round trip on PostgreSQL.
    if (stateful || outcome.fenced) await recorded;
    else this.lateWrites.track(recorded);
    if (handBack || outcome.fenced) this.streams.handedBack(run.run_id);
    else this.streams.ended(run.run_id, kwargs.resumable);
    runEnded({ serverId: ctx.serverId, status: outcome.status, seconds: runSeconds(run.created_at, startedAt) });
    channel.close();
    this.active.delete(run.run_id);
    for (const fn of this.endListeners)
      fn({ runId: run.run_id, status: outcome.status, seconds: (Date.now() - startedAt.getTime()) / 1000 });
    this.ended.retain(active, kwargs.resumable ? RESUMABLE_KEEP_MS : ENDED_KEEP_MS);
    // A slot is free: a run queued for one (on any thread) starts now, not at the next timer tick.
    if (this.timer && !this.stopping && this.slots !== Number.MAX_SAFE_INTEGER) this.passes.fillSlots();
    if (kwargs.webhook)
      void sendWebhook(
        ctx.log,
        kwargs.webhook,
        endedRunPayload(run, outcome, startedAt),
        this.options.apiUrl?.(),
        this.options.webhookGate,
      );
    return outcome;
  }

  /** Records how a run ended (or hands a drained one back); a fenced run records nothing. */
  private async recordOutcome(
    run: Run,
    kwargs: RunKwargs,
    outcome: RunOutcome,
    handBack: boolean,
    rollbackTo: string | null | undefined,
  ): Promise<void> {
    const ctx = this.ctx;
    try {
      if (outcome.fenced)
        ctx.log.warn(
          { runId: run.run_id, attempt: kwargs.attempt ?? 1 },
          "this replica lost the run's lease: another attempt owns it; stopped without recording an outcome",
        );
      else if (handBack) {
        await this.queue.handBack(run, kwargs);
        this.wakeOthers();
      } else await this.finish(run, outcome, !kwargs.temporary, rollbackTo);
    } catch (err) {
      ctx.log.error({ err, runId: run.run_id }, "cannot record the end of a run");
    }
  }

  /** Records the end of a run; the thread's next queued run, claimed meanwhile, starts here at once. */
  private async finish(
    run: Run,
    outcome: RunOutcome,
    stateful: boolean,
    rollbackTo: string | null | undefined,
  ): Promise<void> {
    const next = await this.queue.recordEnd(run, outcome, stateful, rollbackTo);
    if (next) this.startClaimed(next);
  }

  /** Starts a delayed (`after_seconds`) run when due; housekeeping does it if this process is gone by then. */
  private startLater(threadId: string, delayMs: number): void {
    const t = setTimeout(() => {
      if (this.stopping) return;
      void this.queue
        .claimDelayed(threadId, () => this.hasSlot())
        .then((next) => next && this.startClaimed(next))
        .catch((err) => this.ctx.log.warn({ err, threadId }, "cannot start a delayed run; housekeeping retries"));
    }, delayMs + 5);
    t.unref();
  }

  private startClaimed(row: AgentRunsTable): void {
    const kwargs = parseJson<RunKwargs>(row.kwargs, {} as RunKwargs);
    this.launch(toRun(row), kwargs, this.unseal(row.run_id, kwargs), null);
  }

  /**
   * Cancels runs: a run executing here is aborted (`interrupt` keeps its checkpoints, `rollback`
   * removes them and the run); a queued one ends without starting.
   */
  async cancel(threadId: string, runIds: string[], action: CancelAction): Promise<void> {
    for (const runId of runIds) {
      const local = this.active.get(runId);
      if (local) {
        if (!local.abort.signal.aborted) local.abort.abort(action);
        continue;
      }
      this.privates.delete(runId);
      this.followers.notifyStart(runId, null);
      // Running in another process: tell it (PostgreSQL NOTIFY); it records the end.
      const row = await this.queue.owner(runId);
      if (row?.status === "running" && row.worker_id !== this.workerId) {
        await this.signals.cancel({ serverId: this.ctx.serverId, runId, action });
        continue;
      }
      await this.queue.cancelQueued(threadId, runId, action);
    }
  }

  /** Listens for cancels sent by other processes (PostgreSQL). */
  async listen(): Promise<void> {
    this.signals = await openRunSignals(
      this.options.databaseUrl ?? null,
      this.ctx.log,
      (s) => {
        if (s.serverId !== this.ctx.serverId) return;
        const local = this.active.get(s.runId);
        if (local && !local.abort.signal.aborted) local.abort.abort(s.action);
      },
      signalChannel(this.ctx.serverId, this.options.signalSecret),
      (s) => {
        // A run waits for a slot: claim it now if this process has one (the poll stays the fallback),
        // else when one frees here.
        if (s.serverId !== this.ctx.serverId) return;
        this.passes.othersQueued();
        if (this.timer && !this.stopping && this.hasSlot()) this.passes.tick();
      },
    );
  }

  /** A run was left `pending` for a free slot: other processes look for it at once. */
  private wakeOthers(): void {
    void this.signals
      .wake(this.ctx.serverId)
      .catch((err) => this.ctx.log.warn({ err }, "cannot wake other processes for a queued run"));
  }

  start(): void {
    const tick = () => this.passes.tick();
    tick();
    // Leases are renewed every third of their length; expired leases and queued runs are looked
    // for more often on replicas, so a takeover comes within a lease and a second.
    const every = Math.floor(this.options.leaseMs / 3);
    this.timer = setInterval(tick, Math.max(200, this.streams.enabled ? Math.min(500, every) : every));
    this.timer.unref();
  }

  /** One full housekeeping pass; true when queued runs may be left that it did not start. */
  async housekeeping(): Promise<boolean> {
    await this.clock.refresh();
    return this.housekeeper.housekeeping();
  }

  /** At an `exclusive` start: settles every run another (dead) process left running. */
  async recoverAbandoned(): Promise<number> {
    return this.housekeeper.recoverAbandoned();
  }

  /** Stops: runs still executing end as errors (a restart must not leave them `running`). */
  async stop(graceMs = 2000): Promise<void> {
    this.stopping = true;
    this.stopped.abort();
    if (this.timer) clearInterval(this.timer);
    const running = [...this.active.values()];
    const allDone = () => Promise.allSettled(running.map((a) => a.done));
    if (this.streams.enabled) {
      // Replicas: JS graph runs stop at their next superstep boundary (LangGraph's
      // RunControl.requestDrain) with their checkpoint saved, and are handed back at once.
      for (const c of this.controls.values()) c.requestDrain("shutdown");
      await Promise.race([allDone(), new Promise((r) => setTimeout(r, graceMs).unref())]);
    }
    for (const a of running) if (!a.abort.signal.aborted && this.active.has(a.run.run_id)) a.abort.abort("shutdown");
    await Promise.race([allDone(), new Promise((r) => setTimeout(r, graceMs).unref())]);
    await this.lateWrites.settled();
    await this.signals.close();
    await this.streams.close();
  }
}
